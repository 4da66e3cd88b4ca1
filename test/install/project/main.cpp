// The installed-package check (test/install/run.sh): 20 steps of the compiled SGD step
// (lr 0.1) on the MLP's golden batch, each loss compared with PyTorch's run of the same
// 20 steps (examples/mlp/golden.safetensors, tools/export/gen_models.py).
// Usage: train_mlp GOLDEN. Exit 0 when every loss is within 1e-4 relative of PyTorch's.
#include "mlp.h"

#include "aotc/trainer.h"

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <exception>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s GOLDEN\n", argv[0]);
    return 1;
  }
  try {
    aotc::rt::SafetensorsFile golden = aotc::rt::readSafetensors(argv[1]);
    aotc::rt::Trainer trainer(mlp_program, aotc::rt::readWeights(mlp_program, MLP_WEIGHTS));
    std::vector<const aotc::rt::Tensor *> inputs;
    for (int i : trainer.userInputs())
      inputs.push_back(&golden.get(std::string("input.") + mlp_program.inputs[i].name, argv[1]));
    const aotc::rt::Tensor &want = golden.get("loss", argv[1]);
    double worst = 0;
    for (int k = 0; k < want.numel(); ++k) {
      double loss = trainer.step(inputs);
      double err = std::fabs(loss - want.at(k)) / std::fabs(want.at(k));
      worst = std::isnan(err) ? INFINITY : std::max(worst, err);
    }
    std::printf("train_mlp: steps=%lld max_rel_loss_err=%.3g\n", (long long)want.numel(), worst);
    return worst <= 1e-4 ? 0 : 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "train_mlp: error: %s\n", e.what());
    return 1;
  }
}
