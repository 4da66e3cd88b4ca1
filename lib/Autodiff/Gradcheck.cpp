//===- Gradcheck.cpp - Joint-graph gradients vs central differences -----------===//
//
// The check of torch.autograd.gradcheck (torch/autograd/gradcheck.py, "slow
// mode"), in float64 through the reference evaluator: with a random cotangent
// t per floating output, L(x) = sum_k <t_k, out_k(x)>, and for every element of
// every requires-grad input the joint graph's gradient must match
// (L(x + eps e_i) - L(x - eps e_i)) / (2 eps) within atol + rtol |numeric|.
//===----------------------------------------------------------------------===//
#include "aotc/Autodiff.h"

#include <cmath>
#include <cstdio>

namespace aotc {


GradcheckResult gradcheck(const Program &forward, const DerivativeRules &rules,
                          const GradcheckOptions &opts) {
  std::mt19937_64 rng(opts.seed);
  std::vector<Node *> phs = forward.forward.placeholders();
  std::vector<RefTensor> x = opts.inputs;
  if (x.empty())
    for (Node *ph : phs) x.push_back(randomTensor(ph->type(), rng, opts.lo, opts.hi));
  AOTC_ASSERT(x.size() == phs.size(), "gradcheck: need one input per placeholder");

  Program joint = forward.clone();
  buildJoint(joint, rules);

  std::vector<Node *> outs = forward.forward.outputs();
  std::vector<RefTensor> tangents; // per output; empty for outputs without a tangent
  std::vector<RefTensor> jointIn = x;
  for (size_t k = 0; k < outs.size(); ++k) {
    Node *o = outs[k];
    if (forward.outputHasTangent((int)k, o->type().dtype)) {
      tangents.push_back(randomTensor(o->type(), rng, -1.0, 1.0));
      jointIn.push_back(tangents.back());
    } else {
      tangents.emplace_back();
    }
  }
  std::vector<RefTensor> jr = evaluate(joint.forward, jointIn);
  AOTC_ASSERT(jr.size() == outs.size() + joint.gradOf.size(), "gradcheck: joint output count");

  auto loss = [&](const std::vector<RefTensor> &in) {
    std::vector<RefTensor> r = evaluate(forward.forward, in);
    double L = 0.0;
    for (size_t k = 0; k < outs.size(); ++k) {
      if (tangents[k].data.empty()) continue;
      for (int64_t i = 0; i < r[k].numel(); ++i) L += tangents[k].data[i] * r[k].data[i];
    }
    return L;
  };

  GradcheckResult res;
  for (size_t j = 0; j < joint.gradOf.size(); ++j) {
    size_t pi = 0;
    while (pi < phs.size() && phs[pi]->name != joint.gradOf[j]) ++pi;
    AOTC_ASSERT(pi < phs.size(), "gradcheck: gradOf names an unknown input");
    const RefTensor &analytic = jr[outs.size() + j];
    AOTC_ASSERT(analytic.shape == x[pi].shape, "gradcheck: gradient shape differs from the input's");
    GradcheckInputReport rep;
    rep.name = joint.gradOf[j];
    int64_t worst = -1;
    double worstNum = 0.0;
    for (int64_t i = 0; i < x[pi].numel(); ++i) {
      std::vector<RefTensor> xp = x, xm = x;
      xp[pi].data[i] += opts.eps;
      xm[pi].data[i] -= opts.eps;
      double num = (loss(xp) - loss(xm)) / (2 * opts.eps);
      double a = analytic.data[i];
      double err = std::fabs(a - num);
      double viol = std::isfinite(err) ? err / (opts.atol + opts.rtol * std::fabs(num)) : INFINITY;
      rep.maxAbsErr = std::max(rep.maxAbsErr, std::isfinite(err) ? err : INFINITY);
      if (viol > rep.maxViolation || worst < 0) {
        if (viol >= rep.maxViolation) {
          rep.maxViolation = viol;
          worst = i;
          worstNum = num;
        }
      }
    }
    char buf[256];
    if (worst >= 0)
      std::snprintf(buf, sizeof buf, "%s: max |err| %.3g (element %lld: analytic %.10g, numeric %.10g)%s\n",
                    rep.name.c_str(), rep.maxAbsErr, (long long)worst, analytic.data[worst], worstNum,
                    rep.maxViolation > 1.0 ? "  FAIL" : "");
    else
      std::snprintf(buf, sizeof buf, "%s: empty\n", rep.name.c_str());
    res.message += buf;
    if (rep.maxViolation > 1.0 || !std::isfinite(rep.maxViolation)) res.ok = false;
    res.inputs.push_back(rep);
  }
  return res;
}

} // namespace aotc
