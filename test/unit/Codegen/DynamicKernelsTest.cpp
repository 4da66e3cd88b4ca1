// Kernels over run-time sizes (issue 30 step 3a, docs/dynamic-shapes.md): fusion keeps every size
// that depends on a run-time symbol as an expression (Dim) -- trip counts, access coefficients
// and offsets, index bounds, GEMM sizes and leading dimensions, size constants. The check: the
// kernels of the dynamic export, every expression evaluated at a size, are the kernels of the
// export specialized at that size, field by field (the static build is planned independently, at
// constant sizes). Fixtures: tools/export/gen_dynamic_cases.py.
#include "aotc/Capture.h"
#include "aotc/Kernels.h"
#include "aotc/Stages.h"
#include "aotc/SymExpr.h"

#include <catch2/catch.hpp>

#include <sstream>

using namespace aotc;

namespace {

Program compiled(const std::string &fixture, const std::vector<std::string> &specialize) {
  CaptureOptions o;
  o.specialize = specialize;
  Program p = capture(std::string(AOTC_SRC_ROOT) + "/test/lit/capture/Inputs/" + fixture, o);
  functionalize(p);
  decompose(p);
  buildJoint(p, JointOptions{});
  lower(p);
  partition(p, PartitionerKind::MinCut);
  return p;
}

KernelProgram planned(const Program &p) {
  FusionOptions fo;
  fo.splitIndexSets = false; // a constant-only rewrite: the dynamic kernels do not take it
  return planProgram(p, fo);
}

/// Compares the dynamic kernel graph `d`, evaluated at `sizes`, with the static one `s`; every
/// difference is a line of `diff`. Kernels are paired by what they are (kind, fused ops, the
/// buffers they write), buffers by name: fusion may decide differently at another size (a merge
/// when two extents happen to be equal, a threshold), and such kernels are counted, not compared.
struct Compare {
  const std::map<std::string, int64_t> &sizes;
  const KernelGraph *dg = nullptr, *sg = nullptr;
  std::ostringstream diff;
  int runtime = 0;           ///< Run-time values compared (so a test knows it looked at some).
  int paired = 0, unpaired = 0;

  int64_t at(const Dim &x) {
    runtime += x.symbolic();
    return x.eval(sizes);
  }
  void same(const std::string &what, int64_t dyn, int64_t stat) {
    if (dyn != stat) diff << what << ": " << dyn << " vs " << stat << "\n";
  }
  void buffer(const std::string &what, int d, int s) {
    std::string dn = d < 0 ? "-" : dg->buffers[d].name, sn = s < 0 ? "-" : sg->buffers[s].name;
    if (dn != sn) diff << what << ": buffer " << dn << " vs " << sn << "\n";
  }
  void dims(const std::string &what, const Dims &d, const Dims &s) {
    if (d.size() != s.size()) {
      diff << what << ": rank " << d.size() << " vs " << s.size() << "\n";
      return;
    }
    for (size_t i = 0; i < d.size(); ++i) same(what + "[" + std::to_string(i) + "]", at(d[i]), at(s[i]));
  }
  void gemm(const std::string &w, const GemmDesc &d, const GemmDesc &s) {
    buffer(w + " a", d.a, s.a), buffer(w + " b", d.b, s.b), buffer(w + " c", d.c, s.c);
    same(w + " trans", d.transA * 2 + d.transB, s.transA * 2 + s.transB);
    const Dim GemmDesc::*fields[] = {&GemmDesc::m,    &GemmDesc::n,     &GemmDesc::k,       &GemmDesc::lda,
                                     &GemmDesc::ldb,  &GemmDesc::ldc,   &GemmDesc::offA,    &GemmDesc::offB,
                                     &GemmDesc::offC, &GemmDesc::batch, &GemmDesc::strideA, &GemmDesc::strideB,
                                     &GemmDesc::strideC};
    const char *names[] = {"m", "n", "k", "lda", "ldb", "ldc", "offA", "offB", "offC", "batch", "strideA", "strideB", "strideC"};
    for (size_t i = 0; i < 13; ++i) same(w + " " + names[i], at(d.*fields[i]), at(s.*fields[i]));
    same(w + " alpha/beta", d.alpha == s.alpha && d.beta == s.beta, 1);
  }
  void conv(const std::string &w, const ConvDesc &d, const ConvDesc &s) {
    buffer(w + " a", d.a, s.a), buffer(w + " b", d.b, s.b), buffer(w + " c", d.c, s.c);
    same(w + " role", (int)d.role, (int)s.role);
    same(w + " batch", at(d.batch), s.geom.N);
    same(w + " offsets", d.offA * 1000000 + d.offB * 1000 + d.offC, s.offA * 1000000 + s.offB * 1000 + s.offC);
    ConvGeometry g = d.geom;
    g.N = s.geom.N;
    same(w + " geometry", g.inputShape() == s.geom.inputShape() && g.weightShape() == s.geom.weightShape() &&
                              g.outputShape() == s.geom.outputShape() && g.strideH == s.geom.strideH &&
                              g.strideW == s.geom.strideW && g.padH == s.geom.padH && g.padW == s.geom.padW &&
                              g.dilH == s.geom.dilH && g.dilW == s.geom.dilW && g.groups == s.geom.groups,
         1);
  }
  void phase(const std::string &w, const Phase &d, const Phase &s) {
    dims(w + " inner", d.inner, s.inner);
    same(w + " accesses", (int64_t)d.accesses.size(), (int64_t)s.accesses.size());
    for (size_t i = 0; i < std::min(d.accesses.size(), s.accesses.size()); ++i) {
      const Access &x = d.accesses[i], &y = s.accesses[i];
      const std::string a = w + " access " + std::to_string(i);
      buffer(a, x.buffer, y.buffer);
      same(a + " offset", at(x.offset), at(y.offset));
      dims(a + " coef", x.coef, y.coef);
      same(a + " dyn terms", (int64_t)x.dyn.size(), (int64_t)y.dyn.size());
      for (size_t j = 0; j < std::min(x.dyn.size(), y.dyn.size()); ++j) {
        same(a + " dyn value", x.dyn[j].value, y.dyn[j].value);
        same(a + " dyn stride", at(x.dyn[j].stride), at(y.dyn[j].stride));
        same(a + " dyn bound", at(x.dyn[j].bound), at(y.dyn[j].bound));
      }
    }
    same(w + " insts", (int64_t)d.insts.size(), (int64_t)s.insts.size());
    for (size_t i = 0; i < std::min(d.insts.size(), s.insts.size()); ++i) {
      const Inst &x = d.insts[i], &y = s.insts[i];
      const std::string in = w + " inst " + std::to_string(i);
      same(in + " op", (int)x.op, (int)y.op);
      same(in + " type", (int)x.type, (int)y.type);
      same(in + " operands", x.a * 1000000 + x.b * 1000 + x.c, y.a * 1000000 + y.b * 1000 + y.c);
      same(in + " access", x.access, y.access);
      int64_t iv = x.iconst;
      double fv = x.fconst;
      if (!x.sym.empty()) {
        ++runtime;
        iv = SymExpr::parse(x.sym).eval(sizes);
        fv = (double)iv;
        if (isFloating(x.type)) iv = 0; // a floating constant keeps its value in fconst
      }
      same(in + " iconst", iv, y.iconst);
      if (fv != y.fconst && !(fv != fv && y.fconst != y.fconst)) diff << in << " fconst: " << fv << " vs " << y.fconst << "\n";
    }
    same(w + " reductions", (int64_t)d.reductions.size(), (int64_t)s.reductions.size());
    for (size_t i = 0; i < std::min(d.reductions.size(), s.reductions.size()); ++i)
      same(w + " reduction", (int)d.reductions[i].kind * 100 + d.reductions[i].value,
           (int)s.reductions[i].kind * 100 + s.reductions[i].value);
    same(w + " stores", (int64_t)d.stores.size(), (int64_t)s.stores.size());
    for (size_t i = 0; i < std::min(d.stores.size(), s.stores.size()); ++i)
      same(w + " store", d.stores[i].access * 1000 + d.stores[i].value, s.stores[i].access * 1000 + s.stores[i].value);
  }
  std::string key(const KernelGraph &g, const Kernel &k) {
    std::string s = std::to_string((int)k.kind);
    for (auto &o : k.ops) s += " " + o;
    s += " ->";
    for (int b : k.writes) s += " " + g.buffers[b].name;
    return s;
  }
  void graph(const std::string &w, const KernelGraph &d, const KernelGraph &s) {
    dg = &d, sg = &s;
    std::map<std::string, const Buffer *> byName;
    for (auto &b : s.buffers) byName[b.name] = &b;
    for (auto &b : d.buffers)
      if (auto it = byName.find(b.name); it != byName.end()) {
        if (b.kind != it->second->kind || b.index != it->second->index) diff << w << " buffer " << b.name << ": placed otherwise\n";
        dims(w + " buffer " + b.name, dimsOf(b.type), dimsOf(it->second->type));
      }
    std::multimap<std::string, const Kernel *> stat;
    for (auto &k : s.kernels) stat.emplace(key(s, k), &k);
    for (const Kernel &x : d.kernels) {
      auto it = stat.find(key(d, x));
      if (it == stat.end()) {
        ++unpaired;
        continue;
      }
      const Kernel &y = *it->second;
      stat.erase(it);
      ++paired;
      const std::string k = w + " " + x.name + "/" + y.name;
      dims(k + " outer", x.outer, y.outer);
      if (x.kind == Kernel::Kind::Extern && x.call.fn == ExternFn::Gemm) gemm(k + " gemm", x.call.gemm, y.call.gemm);
      if (x.kind == Kernel::Kind::Extern && x.call.fn == ExternFn::Conv) conv(k + " conv", x.call.conv, y.call.conv);
      same(k + " phases", (int64_t)x.phases.size(), (int64_t)y.phases.size());
      for (size_t j = 0; j < std::min(x.phases.size(), y.phases.size()); ++j)
        phase(k + " phase " + std::to_string(j), x.phases[j], y.phases[j]);
    }
  }
};

std::map<std::string, int64_t> parseSizes(const std::vector<std::string> &entries) {
  std::map<std::string, int64_t> m;
  for (const std::string &e : entries) m[e.substr(0, e.find('='))] = std::stoll(e.substr(e.find('=') + 1));
  return m;
}

/// The differences between the dynamic kernels at `entries` and the static ones (empty: none);
/// `runtime` counts the run-time values compared.
struct Result {
  std::string diff;
  int runtime = 0, paired = 0, unpaired = 0;
};

Result check(const KernelProgram &dyn, const std::string &fixture, const std::vector<std::string> &entries,
             bool largest) {
  KernelProgram stat = planned(compiled(fixture, entries));
  auto sizes = parseSizes(entries);
  Compare c{sizes};
  c.graph("forward", dyn.forward, stat.forward);
  c.graph("backward", dyn.backward, stat.backward);
  c.graph("eval", dyn.eval, stat.eval);
  if (largest) c.same("saved bytes", dyn.savedBytes, stat.savedBytes); // planned at the largest sizes
  return Result{c.diff.str(), c.runtime, c.paired, c.unpaired};
}

} // namespace

TEST_CASE("dynamic kernels evaluated at the largest sizes are the static kernels there", "[dynamic]") {
  struct Case {
    const char *fixture;
    std::vector<std::string> max, odd;
  };
  for (const Case &t : {Case{"dyn_mlp.pt2", {"s17=64"}, {"s17=37"}},
                        Case{"dyn_lm.pt2", {"s48=8", "s24=16"}, {"s48=3", "s24=7"}},
                        Case{"dyn_ops.pt2", {"s13=16", "s27=12"}, {"s13=5", "s27=7"}},
                        Case{"dyn_cnn.pt2", {"s17=16"}, {"s17=5"}}}) {
    INFO(t.fixture);
    KernelProgram dyn = planned(compiled(t.fixture, {}));
    for (const auto &sizes : {t.max, t.odd}) {
      Result r = check(dyn, t.fixture, sizes, &sizes == &t.max);
      INFO(sizes[0] << ": " << r.paired << " kernels paired, " << r.unpaired << " not, " << r.runtime << " run-time values");
      CHECK(r.diff == "");
      CHECK(r.runtime > 20);
      CHECK(r.paired >= 9 * (r.paired + r.unpaired) / 10); // fusion decides alike at nine kernels of ten
    }
  }
}

TEST_CASE("dynamic kernels: the comparison finds a size folded to its largest value", "[dynamic]") {
  // Negative control: the same comparison against a static build at another size fails.
  KernelProgram dyn = planned(compiled("dyn_mlp.pt2", {}));
  KernelProgram stat = planned(compiled("dyn_mlp.pt2", {"s17=64"}));
  auto sizes = parseSizes({"s17=37"});
  Compare c{sizes};
  c.graph("forward", dyn.forward, stat.forward);
  CHECK(c.paired > 8);
  CHECK(c.diff.str().find("m: 37 vs 64") != std::string::npos);
}

TEST_CASE("Dim arithmetic keeps the normal form", "[dynamic]") {
  Dim s = Dim::expr("s17", 64), t = Dim::expr("s24", 16);
  CHECK((s * 8).str() == "8*s17");
  CHECK((s * 8).ref() == 512);
  CHECK((8 * s) == (s * 8));
  CHECK((s * t).str() == (t * s).str());
  CHECK((s + 1 - 1) == s);
  CHECK((s - s).is(0));
  CHECK((s * 0).is(0));
  CHECK(numelOf(Dims{s, Dim(16)}).str() == "16*s17");
  CHECK(contiguousStrides(Dims{Dim(4), s, Dim(16)})[0].str() == "16*s17");
  CHECK((s * 8).eval({{"s17", 5}}) == 40);
  CHECK(Dim::expr("2*s17 - 1", 127).eval({{"s17", 3}}) == 5);
  CHECK(dimsStr(Dims{s, Dim(3)}) == "[s17, 3]");
  CHECK(Dim(7).is(7));
  CHECK_FALSE(s.is(64)); // a run-time size is not its reference value
  CHECK_THROWS((void)(int64_t)s);
}

