//===- Evaluator.cpp - <name>_eval on a Trainer's weights ------------------===//
//
// This file implements Evaluator (trainer.h): the eval program's parameters, buffers and
// constants point at the trainer's tensors (bound by FQN once, in the constructor); its RNG
// state, if any, at the trainer's (read only: eval does not write mutated inputs back);
// lifted constants come from the eval program's weights file.
//===----------------------------------------------------------------------===//
#include "aotc/trainer.h"

#include "Internal.h"

#include <algorithm>
#include <cstring>

namespace aotc::rt {

using detail::progName;

Evaluator::Evaluator(const Trainer &trainer, const aotc_program &program, const SafetensorsFile *constants)
    : program_(&program) {
  const std::string name = progName(program);
  context_ = detail::openProgram(program, "Evaluator");
  if (!program.eval)
    throw RuntimeError("aotc runtime: program '" + name +
                       "' has no eval entry point (a CUDA object's; docs/training.md \"Eval\")");
  const aotc_program &tp = trainer.program();
  for (int i = 0; i < program.num_inputs; ++i) {
    const aotc_tensor_desc &d = program.inputs[i];
    void *ptr = nullptr;
    if (d.role == AOTC_ROLE_USER_INPUT) {
      userInputs_.push_back(i);
    } else if (d.role == AOTC_ROLE_RNG_STATE) {
      for (int j = 0; j < tp.num_inputs && !ptr; ++j)
        if (tp.inputs[j].role == AOTC_ROLE_RNG_STATE) ptr = trainer.in_[j];
      if (!ptr)
        throw RuntimeError(name + ": input '" + d.name + "' is an RNG state input but '" + progName(tp) +
                           "' has none");
    } else {
      // The trainer's weight of that name: its buffer (owned or borrowed) and descriptor.
      const aotc_tensor_desc *td = nullptr;
      for (int j = 0; j < tp.num_inputs && !ptr; ++j)
        if (aotc_role_is_weight(tp.inputs[j].role) && std::string(tp.inputs[j].name) == d.name) {
          ptr = trainer.in_[j];
          td = &tp.inputs[j];
        }
      auto sameType = [](const aotc_tensor_desc &a, const aotc_tensor_desc &b) {
        return a.dtype == b.dtype && a.rank == b.rank && std::equal(a.shape, a.shape + a.rank, b.shape);
      };
      // Lifted constants are named by their order in each export (lifted_tensor_0, ...), so a
      // name says nothing across two exports: their values come from the eval program's own
      // weights file (the trainer's tensor is shared when it holds the same bytes).
      if (d.role == AOTC_ROLE_CONSTANT && &program != &tp) { // the trainer's own program: its own constants
        const Tensor *own = constants ? constants->find(d.name) : nullptr;
        if (!own || !own->matches(d))
          throw RuntimeError(name + ": constant '" + d.name + "' (" + descTypeString(d) + ") " +
                             (constants ? "is not in the weights file given" : "needs the eval program's weights file") +
                             " (Evaluator's third argument: readWeights(" + name + "_program, ...))");
        if (!(ptr && sameType(*td, d) && std::memcmp(ptr, own->data(), (size_t)d.bytes) == 0)) {
          owned_.push_back(own->clone());
          ptr = owned_.back().data();
          td = &d;
        }
      }
      if (!ptr)
        throw RuntimeError(name + ": " + detail::roleWord(d.role) + " '" + d.name + "' (" + descTypeString(d) +
                           ") is not one of '" + progName(tp) + "''s weights: pair exports of the same model");
      if (!sameType(*td, d))
        throw RuntimeError(name + ": " + detail::roleWord(d.role) + " '" + d.name + "' is " + descTypeString(d) +
                           " but '" + progName(tp) + "' has " + descTypeString(*td));
    }
    in_.push_back(ptr);
  }
  for (int k = 0; k < program.num_outputs; ++k) {
    outputs_.push_back(Tensor::like(program.outputs[k]));
    out_.push_back(outputs_.back().data());
  }
  scratch_ = AlignedBuffer(program.scratch_bytes);
  detail::pinBlasToOneThread();
}

const std::vector<Tensor> &Evaluator::run(std::span<const Tensor *const> inputs) {
  const aotc_program &p = *program_;
  detail::bindUserInputs(p, userInputs_, inputs, in_, "eval takes");
  int rc = p.eval(context_.get(), in_.data(), out_.data(), scratch_.data());
  if (rc != 0) detail::throwEntryPointError(p, "eval", rc, scratch_.data(), scratch_.size(), context_.get());
  return outputs_;
}

} // namespace aotc::rt
