//===- Complex.h - Complex values as their view_as_real, at capture ---------*- C++ -*-===//
//
// Internal to lib/Capture. aotc has no complex dtype: from capture on, a complex64 (complex128)
// tensor of shape S is an f32 (f64) tensor of shape S + [2] holding (re, im) pairs, exactly
// torch.view_as_real's layout, so no later stage knows complex numbers exist. The FFT ops
// (lib/IR/ops/Fft.cpp) and view_as_real / view_as_complex are defined on that representation;
// every other exported call that reads or makes a complex value is rewritten here into real
// ops on the pairs (docs/complex.md lists them). A graph input or output of a
// complex dtype is refused (pass or return its view_as_real).
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Graph.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace aotc::complex_values {

/// Targets that only exist for complex values (view_as_real, view_as_complex, _conj, complex,
/// polar, angle, real, imag, resolve_conj, resolve_neg, conj_physical): capture reads them
/// although the registry has no entry.
bool isComplexOnlyTarget(const std::string &canonicalTarget);

/// The spelling of a complex ScalarType argument (dtype=torch.complex64) in an Arg: an EnumLit
/// "torch.complex64" / "torch.complex128" (only the rewrites here read it).
EnumLit complexDTypeLit(DType real);

/// A Python complex number argument (`x * 1j`): an EnumLit "complex(<re>, <im>)" (%.17g).
EnumLit complexNumberLit(double re, double im);

struct ComplexCall {
  std::string name;   ///< The exported node's name: the node returned carries it.
  std::string target; ///< Canonical target.
  std::vector<Arg> args;
  std::vector<std::pair<std::string, Arg>> kwargs;
  SourceLoc loc;
  std::string stackTrace;
  std::string userOp; ///< Node::userOp of the nodes it becomes.
  bool resultComplex = false; ///< The export's meta gives the result a complex dtype.
};

/// Whether `c` must go through lowerComplexCall: a complex-only target, a complex operand
/// (`isComplex`), a complex dtype argument, or a complex result.
bool needsComplexLowering(const ComplexCall &c, const std::function<bool(const Node *)> &isComplex);

/// Appends to `g` the real nodes computing `c` on the pair representation and returns the one
/// holding its result, named c.name (a complex result: the pairs; else the real value).
/// An op aotc cannot compute on complex values is a node error naming it.
Node *lowerComplexCall(Graph &g, const ComplexCall &c, const std::function<bool(const Node *)> &isComplex);

} // namespace aotc::complex_values
