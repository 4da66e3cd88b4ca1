//===- Complex.cpp - Exported calls on complex values, rewritten on (re, im) pairs --------===//
//
// See Complex.h. A complex operand x is read as its parts re = select(x, -1, 0) and
// im = select(x, -1, 1); a real operand has no imaginary part; a complex result is
// stack([re, im], -1) of its parts expanded to the result's shape. Shape arguments are
// rewritten for the trailing pair dim (dims wrapped against the complex rank, sizes + [2]).
//===----------------------------------------------------------------------===//
#include "Complex.h"

#include "aotc/OpRegistry.h"

#include <cstdio>
#include <numbers>
#include <optional>
#include <set>

namespace aotc::complex_values {
namespace {

const std::set<std::string> &complexOnly() {
  static const std::set<std::string> s = {
      "aten.view_as_real.default", "aten.view_as_complex.default", "aten._conj.default",
      "aten.conj_physical.default", "aten._conj_physical.default", "aten.resolve_conj.default",   "aten.resolve_neg.default",
      "aten.complex.default",       "aten.polar.default",          "aten.angle.default",
      "aten.real.default",          "aten.imag.default"};
  return s;
}

/// The parts of a complex number argument (complexNumberLit), if `a` is one.
std::optional<std::pair<double, double>> complexNumber(const Arg &a) {
  auto *e = std::get_if<EnumLit>(&a);
  double re = 0, im = 0;
  if (!e || std::sscanf(e->text.c_str(), "complex(%lf, %lf)", &re, &im) != 2) return std::nullopt;
  return std::make_pair(re, im);
}

bool isComplexDType(const Arg &a) {
  auto *e = std::get_if<EnumLit>(&a);
  return e && (e->text == "torch.complex64" || e->text == "torch.complex128");
}

/// The part of a value: a node (real tensor), a Python number, or nothing (a zero).
struct Part {
  Arg v;
  bool zero() const { return std::holds_alternative<std::monostate>(v); }
};

class Lowering {
public:
  Lowering(Graph &g, const ComplexCall &c, const std::function<bool(const Node *)> &isComplex)
      : g_(g), c_(c), isComplex_(isComplex) {
    at_.name = c.name;
    at_.target = c.target;
    at_.loc = c.loc;
    at_.stackTrace = c.stackTrace;
    at_.userOp = c.userOp;
  }
  Node *run();

private:
  [[noreturn]] void fail(const std::string &msg) { nodeError(at_, msg); }
  Node *call(const std::string &target, std::vector<Arg> args,
             std::vector<std::pair<std::string, Arg>> kwargs = {}) {
    Node *n = buildCall(g_, g_.uniqueName(c_.name + "_cplx"), target, args, kwargs, c_.loc, nullptr, {},
                        SizeInference::Reference);
    n->inheritSource(at_);
    return n;
  }
  /// `target` with schema-ordered arguments (bindArgs' order): keyword-only ones as keywords.
  Node *callBound(const std::string &target, const std::vector<Arg> &a) {
    const OpDef *op = OpRegistry::get().lookup(target);
    AOTC_ASSERT(op && op->schema.args.size() == a.size(), "capture: complex lowering: bad arguments of " + target);
    std::vector<Arg> pos;
    std::vector<std::pair<std::string, Arg>> kw;
    for (size_t i = 0; i < a.size(); ++i)
      if (op->schema.args[i].kwargOnly) kw.push_back({op->schema.args[i].name, a[i]});
      else pos.push_back(a[i]);
    return call(target, pos, kw);
  }
  /// A complex value: an exported one (isComplex_) or a pair this rewrite made.
  bool cplx(const Node *n) const { return isComplex_(n) || mine_.count(n) != 0; }
  bool complexArg(const Arg &a) const {
    auto *n = std::get_if<Node *>(&a);
    return n && *n && cplx(*n);
  }
  Node *node(size_t i) {
    if (i >= args_.size() || !std::holds_alternative<Node *>(args_[i]))
      fail("argument " + std::to_string(i) + " must be a tensor");
    return std::get<Node *>(args_[i]);
  }
  /// The complex rank of a pair tensor.
  int64_t crank(Node *x) { return x->type().rank() - 1; }
  int64_t wrap(int64_t d, int64_t rank) {
    int64_t w = d < 0 ? d + rank : d;
    if (w < 0 || w >= std::max<int64_t>(rank, 1))
      fail("Dimension out of range (expected to be in range of [" + std::to_string(-std::max<int64_t>(rank, 1)) +
           ", " + std::to_string(std::max<int64_t>(rank, 1) - 1) + "], but got " + std::to_string(d) + ")");
    return w;
  }
  Part re(const Arg &a) {
    if (auto z = complexNumber(a)) return Part{z->first};
    return complexArg(a) ? Part{call("aten.select.int", {a, (int64_t)-1, (int64_t)0})} : Part{a};
  }
  Part im(const Arg &a) {
    if (auto z = complexNumber(a)) return z->second == 0 ? Part{} : Part{z->second};
    return complexArg(a) ? Part{call("aten.select.int", {a, (int64_t)-1, (int64_t)1})} : Part{};
  }
  Part bin(const char *op, const Part &a, const Part &b) {
    std::string o = op;
    if (o == "mul" && (a.zero() || b.zero())) return {};
    if (o == "add" && a.zero()) return b;
    if ((o == "add" || o == "sub") && b.zero()) return a;
    if (o == "sub" && a.zero()) return {numberOrNeg(b)};
    if (o == "div" && a.zero()) return {};
    return {call("aten." + o + ".Tensor", {a.v, b.v})};
  }
  Arg numberOrNeg(const Part &b) {
    if (auto *d = std::get_if<double>(&b.v)) return -*d;
    if (auto *i = std::get_if<int64_t>(&b.v)) return -*i;
    return call("aten.neg.default", {b.v});
  }
  /// The real dtype of the result (meta: the result's pair dtype, or a real result's).
  Node *asTensor(const Part &p, const Shape &s, DType dt) {
    Node *n = nullptr;
    if (p.zero()) return call("aten.full.default", {s, 0.0}, {{"dtype", DTypeLit{dt}}});
    if (auto *x = std::get_if<Node *>(&p.v)) n = *x;
    else return call("aten.full.default", {s, p.v}, {{"dtype", DTypeLit{dt}}});
    if (n->type().dtype != dt) n = call("aten._to_copy.default", {n}, {{"dtype", DTypeLit{dt}}});
    if (n->type().shape != s) n = call("aten.expand.default", {n, s});
    return n;
  }
  /// cat([re, im] unsqueezed, -1) (torch's stack), both broadcast to the complex shape `s`.
  Node *make(const Part &r, const Part &i, const Shape &s, DType dt) {
    Node *a = call("aten.unsqueeze.default", {asTensor(r, s, dt), (int64_t)-1});
    Node *b = call("aten.unsqueeze.default", {asTensor(i, s, dt), (int64_t)-1});
    Node *pair = call("aten.cat.default", {std::vector<Node *>{a, b}, (int64_t)-1});
    mine_.insert(pair);
    return pair;
  }
  /// The complex shape of the broadcast of the operands at `idx` (tensors; complex ones without their pair dim).
  Shape broadcastShape(const std::vector<Arg> &ops) {
    Shape out;
    for (const Arg &a : ops) {
      auto *n = std::get_if<Node *>(&a);
      if (!n) continue;
      Shape s = (*n)->type().shape;
      if (cplx(*n)) s.pop_back();
      if (s.size() > out.size()) out.insert(out.begin(), s.size() - out.size(), 1);
      size_t off = out.size() - s.size();
      for (size_t k = 0; k < s.size(); ++k) {
        int64_t &o = out[off + k];
        if (o == 1) o = s[k];
        else if (s[k] != 1 && s[k] != o) fail("the shapes of the operands cannot be broadcast together");
      }
    }
    return out;
  }
  DType realDType(const std::vector<Arg> &ops) {
    bool f64 = false;
    for (const Arg &a : ops)
      if (auto *n = std::get_if<Node *>(&a)) f64 |= (*n)->type().dtype == DType::F64;
    return f64 ? DType::F64 : DType::F32;
  }
  /// The result node, renamed to the exported name (an existing value gets an alias).
  Node *finish(Node *r) {
    if (!r->isCall() || r->name.rfind(c_.name + "_cplx", 0) != 0) r = call("aten.alias.default", {r});
    g_.rename(r, c_.name);
    return r;
  }
  Node *binary(const std::string &op);
  Node *matmul(const std::string &op);
  Node *shapeOp(const std::string &base);

  Graph &g_;
  const ComplexCall &c_;
  const std::function<bool(const Node *)> &isComplex_;
  Node at_; ///< For diagnostics before the result exists.
  std::set<const Node *> mine_; ///< Pairs made here (complex, although the export never named them).
  bool complexDType_ = false; ///< A dtype argument named a complex dtype (bound as its real one).
  std::vector<Arg> args_;
};

Node *Lowering::binary(const std::string &op) {
  Arg a = args_[0], b = args_[1];
  if (op == "add" || op == "sub") {
    // alpha scales the second operand (a number).
    if (args_.size() > 2 && !std::holds_alternative<std::monostate>(args_[2])) {
      const Arg &al = args_[2];
      bool one = (std::holds_alternative<int64_t>(al) && std::get<int64_t>(al) == 1) ||
                 (std::holds_alternative<double>(al) && std::get<double>(al) == 1.0);
      if (!one) {
        if (complexArg(b)) {
          Node *scaled = call("aten.mul.Tensor", {b, al});
          mine_.insert(scaled);
          b = scaled;
        } else if (std::holds_alternative<Node *>(b)) {
          b = call("aten.mul.Tensor", {b, al});
        }
        else fail("alpha with a number operand on complex values is not supported");
      }
    }
  }
  Shape s = broadcastShape({a, b});
  DType dt = realDType({a, b});
  Part ar = re(a), ai = im(a), br = re(b), bi = im(b);
  Part r, i;
  if (op == "add" || op == "sub") {
    r = bin(op.c_str(), ar, br);
    i = bin(op.c_str(), ai, bi);
  } else if (op == "mul") {
    r = bin("sub", bin("mul", ar, br), bin("mul", ai, bi));
    i = bin("add", bin("mul", ar, bi), bin("mul", ai, br));
  } else { // div: a conj(b) / |b|^2; a real b divides both parts.
    if (bi.zero()) {
      r = bin("div", ar, br);
      i = bin("div", ai, br);
    } else {
      Part den = bin("add", bin("mul", br, br), bin("mul", bi, bi));
      r = bin("div", bin("add", bin("mul", ar, br), bin("mul", ai, bi)), den);
      i = bin("div", bin("sub", bin("mul", ai, br), bin("mul", ar, bi)), den);
    }
  }
  return make(r, i, s, dt);
}

/// mm / bmm: (Ar Br - Ai Bi) + i (Ar Bi + Ai Br), four real products.
Node *Lowering::matmul(const std::string &target) {
  Arg a = args_[0], b = args_[1];
  auto toPair = [&](const Arg &x) -> std::pair<Part, Part> { return {re(x), im(x)}; };
  auto [ar, ai] = toPair(a);
  auto [br, bi] = toPair(b);
  auto mm = [&](const Part &x, const Part &y) -> Part {
    if (x.zero() || y.zero()) return {};
    return {call(target, {x.v, y.v})};
  };
  Part rr = mm(ar, br); // never zero: both real parts exist
  Node *rn = std::get<Node *>(rr.v);
  Part r = bin("sub", rr, mm(ai, bi)), i = bin("add", mm(ar, bi), mm(ai, br));
  return make(r, i, rn->type().shape, rn->type().dtype);
}

/// Shape ops on one complex tensor (args_[0]): the same op on the pairs, dims and sizes
/// rewritten for the trailing pair dim.
Node *Lowering::shapeOp(const std::string &t) {
  std::vector<Arg> a = args_;
  auto dimAt = [&](size_t i, int64_t rank) { a[i] = wrap(std::get<int64_t>(a[i]), rank); };
  auto dimsAt = [&](size_t i, int64_t rank) {
    std::vector<int64_t> ds = std::get<std::vector<int64_t>>(a[i]);
    for (int64_t &d : ds) d = wrap(d, rank);
    a[i] = ds;
  };
  auto sizesAt = [&](size_t i) {
    std::vector<int64_t> s = std::get<std::vector<int64_t>>(a[i]);
    s.push_back(2);
    a[i] = s;
  };
  if (t == "aten.cat.default" || t == "aten.stack.default") {
    std::vector<Node *> xs = std::get<std::vector<Node *>>(a[0]);
    if (xs.empty()) fail("expected a non-empty list of tensors");
    Shape s0;
    for (Node *&x : xs)
      if (!cplx(x)) {
        // A real tensor joins complex ones as (x, 0).
        x = make(Part{x}, Part{}, x->type().shape, x->type().dtype);
      }
    int64_t r = crank(xs[0]) + (t == "aten.stack.default" ? 1 : 0);
    a[0] = xs;
    dimAt(1, r);
    return callBound(t, a);
  }
  Node *x = node(0);
  int64_t r = crank(x);
  if (t == "aten.view.default" || t == "aten._unsafe_view.default" || t == "aten.reshape.default" ||
      t == "aten.expand.default")
    sizesAt(1);
  else if (t == "aten.permute.default") {
    dimsAt(1, r);
    auto ds = std::get<std::vector<int64_t>>(a[1]);
    ds.push_back(r);
    a[1] = ds;
  } else if (t == "aten.transpose.int") {
    dimAt(1, r);
    dimAt(2, r);
  } else if (t == "aten.unsqueeze.default")
    dimAt(1, r + 1);
  else if (t == "aten.select.int" || t == "aten.slice.Tensor" || t == "aten.squeeze.dim" ||
           t == "aten.index_select.default")
    dimAt(1, r);
  else if (t == "aten.squeeze.dims" || t == "aten.flip.default")
    dimsAt(1, r);
  else if (t == "aten.squeeze.default") {
    std::vector<int64_t> ds;
    for (int64_t d = 0; d < r; ++d)
      if (x->type().shape[d] == 1) ds.push_back(d);
    return call("aten.squeeze.dims", {x, ds});
  } else if (t == "aten.roll.default") {
    if (std::get<std::vector<int64_t>>(a[2]).empty()) fail("roll without dims on complex values is not supported");
    dimsAt(2, r);
  } else if (t == "aten.constant_pad_nd.default") {
    auto p = std::get<std::vector<int64_t>>(a[1]);
    p.insert(p.begin(), {0, 0});
    a[1] = p;
  } else if ((t == "aten.sum.dim_IntList" || t == "aten.mean.dim") && r == 0) {
    return call("aten.clone.default", {x});
  } else if (t == "aten.sum.dim_IntList" || t == "aten.mean.dim") {
    std::vector<int64_t> ds;
    if (auto *v = std::get_if<std::vector<int64_t>>(&a[1])) ds = *v;
    if (ds.empty())
      for (int64_t d = 0; d < r; ++d) ds.push_back(d);
    a[1] = ds;
    dimsAt(1, r);
    if (!std::holds_alternative<std::monostate>(a[3])) fail("a dtype argument on complex values is not supported");
  } else if (t == "aten.sum.default") {
    std::vector<int64_t> ds;
    for (int64_t d = 0; d < r; ++d) ds.push_back(d);
    return call("aten.sum.dim_IntList", {x, ds, false});
  } else if (t != "aten.clone.default" && t != "aten.alias.default" && t != "aten.neg.default" &&
             t != "aten.zeros_like.default")
    return nullptr;
  return callBound(t, a);
}

Node *Lowering::run() {
  const std::string &t = c_.target;
  if (complexOnly().count(t)) {
    if (!c_.kwargs.empty()) fail("keyword arguments are not supported here");
    args_ = c_.args;
  } else {
    const OpDef *op = OpRegistry::get().lookup(t);
    AOTC_ASSERT(op, "capture: complex lowering of the unknown op '" + t + "'");
    at_.op = op;
    // A complex dtype argument binds as its real dtype; complexDType_ remembers it.
    auto real = [&](Arg a) {
      if (isComplexDType(a)) {
        complexDType_ = true;
        a = DTypeLit{std::get<EnumLit>(a).text == "torch.complex64" ? DType::F32 : DType::F64};
      }
      return a;
    };
    // A complex number binds as 0.0 (a Scalar) and is put back afterwards, at its schema index.
    std::vector<std::pair<size_t, Arg>> numbers;
    std::vector<Arg> pos;
    std::vector<std::pair<std::string, Arg>> kw;
    for (const Arg &a : c_.args) {
      if (complexNumber(a)) numbers.push_back({pos.size(), a});
      pos.push_back(complexNumber(a) ? Arg(0.0) : real(a));
    }
    for (const auto &[k, v] : c_.kwargs) {
      for (size_t i = 0; i < op->schema.args.size(); ++i)
        if (op->schema.args[i].name == k && complexNumber(v)) numbers.push_back({i, v});
      kw.push_back({k, complexNumber(v) ? Arg(0.0) : real(v)});
    }
    args_ = bindArgs(at_, pos, kw);
    for (auto &[i, v] : numbers) args_[i] = v;
  }
  auto unaryNode = [&]() {
    if (args_.size() != 1) fail("expected one argument");
    return node(0);
  };
  // Ops that only make sense for complex values, or whose real form is trivial.
  if (t == "aten.view_as_real.default") {
    Node *x = unaryNode();
    if (!cplx(x)) fail("view_as_real is only supported for complex tensors");
    return finish(x);
  }
  if (t == "aten.view_as_complex.default") {
    Node *x = unaryNode();
    if (x->type().rank() < 1 || x->type().shape.back() != 2) fail("Tensor must have a last dimension of size 2");
    if (!isFloating(x->type().dtype)) fail("view_as_complex is only supported for float and double tensors");
    return finish(x);
  }
  if (t == "aten.resolve_conj.default" || t == "aten.resolve_neg.default") return finish(unaryNode());
  if (t == "aten._conj.default" || t == "aten.conj_physical.default" || t == "aten._conj_physical.default") {
    Node *x = unaryNode();
    if (!cplx(x)) return finish(x);
    return finish(make(re(x), Part{call("aten.neg.default", {std::get<Node *>(im(x).v)})},
                       Shape(x->type().shape.begin(), x->type().shape.end() - 1), x->type().dtype));
  }
  if (t == "aten.real.default" || t == "aten.imag.default") {
    Node *x = unaryNode();
    if (!cplx(x)) {
      if (t == "aten.imag.default") fail("imag is not implemented for tensors with non-complex dtypes.");
      return finish(x);
    }
    return finish(std::get<Node *>((t == "aten.real.default" ? re(x) : im(x)).v));
  }
  if (t == "aten.complex.default" || t == "aten.polar.default") {
    if (args_.size() != 2) fail("expected two arguments");
    Node *a = node(0), *b = node(1);
    if (cplx(a) || cplx(b)) fail("expected real operands");
    Shape s = broadcastShape({a, b});
    if (t == "aten.complex.default") return finish(make(Part{a}, Part{b}, s, a->type().dtype));
    Node *r = call("aten.mul.Tensor", {a, call("aten.cos.default", {b})});
    Node *i = call("aten.mul.Tensor", {a, call("aten.sin.default", {b})});
    return finish(make(Part{r}, Part{i}, s, a->type().dtype));
  }
  if (t == "aten.angle.default") {
    Node *x = unaryNode();
    if (cplx(x)) return finish(call("aten.atan2.default", {im(x).v, re(x).v}));
    // Real input: pi for negative values, 0 otherwise, NaN kept (torch's angle).
    Node *neg = call("aten.lt.Scalar", {x, (int64_t)0});
    Node *v = call("aten.where.ScalarOther", {neg, call("aten.full_like.default", {x, std::numbers::pi}), 0.0});
    return finish(call("aten.where.self", {call("aten.isnan.default", {x}), x, v}));
  }
  if (t == "aten.abs.default") {
    // |x| = sqrt(re^2 + im^2), 0 (and gradient 0, as torch's sgn(0) = 0) at x = 0.
    Node *x = unaryNode();
    Node *r = std::get<Node *>(re(x).v), *i = std::get<Node *>(im(x).v);
    Node *s = call("aten.add.Tensor", {call("aten.mul.Tensor", {r, r}), call("aten.mul.Tensor", {i, i})});
    Node *z = call("aten.eq.Scalar", {s, (int64_t)0});
    Node *safe = call("aten.where.ScalarSelf", {z, 1.0, s});
    return finish(call("aten.where.ScalarSelf", {z, 0.0, call("aten.sqrt.default", {safe})}));
  }
  if (t == "aten.exp.default") {
    Node *x = unaryNode();
    Node *m = call("aten.exp.default", {re(x).v});
    Node *i = std::get<Node *>(im(x).v);
    return finish(make(Part{call("aten.mul.Tensor", {m, call("aten.cos.default", {i})})},
                       Part{call("aten.mul.Tensor", {m, call("aten.sin.default", {i})})},
                       m->type().shape, m->type().dtype));
  }
  if (t == "aten._to_copy.default") {
    Node *x = node(0);
    const Arg &dt = args_[1];
    if (complexDType_) {
      DType real = std::get<DTypeLit>(dt).dtype;
      if (cplx(x)) return finish(call("aten._to_copy.default", {x}, {{"dtype", DTypeLit{real}}}));
      return finish(make(Part{x}, Part{}, x->type().shape, real));
    }
    if (!cplx(x)) fail("unexpected complex lowering of a real _to_copy");
    if (std::holds_alternative<std::monostate>(dt)) return finish(call("aten.clone.default", {x}));
    // To a real dtype: the real part (torch warns that the imaginary part is discarded).
    return finish(call("aten._to_copy.default", {re(x).v}, {{"dtype", dt}}));
  }
  for (const char *op : {"add", "sub", "mul", "div"})
    if (t == std::string("aten.") + op + ".Tensor" || t == std::string("aten.") + op + ".Scalar")
      return finish(binary(op));
  if (t == "aten.mm.default" || t == "aten.bmm.default") return finish(matmul(t));
  if (t == "aten.full.default" && complexDType_) {
    // full(size, v, dtype=complex): (v, 0) pairs (a real fill value).
    const Arg &v = args_[1];
    if (!std::holds_alternative<int64_t>(v) && !std::holds_alternative<double>(v) && !std::holds_alternative<bool>(v))
      fail("a complex fill value is not supported");
    DType dt = std::get<DTypeLit>(args_[2]).dtype;
    Shape s = std::get<std::vector<int64_t>>(args_[0]);
    Part re{std::holds_alternative<bool>(v) ? Arg((int64_t)std::get<bool>(v)) : v};
    return finish(make(re, Part{}, s, dt));
  }
  if (t == "aten.copy.default" || t == "aten.slice_scatter.default") {
    // The written value joins the complex one as (x, 0) when it is real; copy broadcasts it.
    Node *self = node(0), *src = node(1);
    auto pair = [&](Node *x) { return cplx(x) ? x : make(Part{x}, Part{}, x->type().shape, x->type().dtype); };
    if (!cplx(self)) fail("writing a complex value into a real tensor is not supported");
    std::vector<Arg> a = args_;
    a[1] = pair(src);
    if (t == "aten.slice_scatter.default") a[2] = wrap(std::get<int64_t>(a[2]), crank(self));
    return finish(callBound(t, a));
  }
  if (t == "aten.where.self") {
    Node *cond = node(0);
    Shape s = broadcastShape({args_[0], args_[1], args_[2]});
    DType dt = realDType({args_[1], args_[2]});
    auto part = [&](const Arg &v, bool imag) {
      Part p = imag ? im(v) : re(v);
      return asTensor(p, s, dt);
    };
    Node *r = call("aten.where.self", {cond, part(args_[1], false), part(args_[2], false)});
    Node *i = call("aten.where.self", {cond, part(args_[1], true), part(args_[2], true)});
    return finish(make(Part{r}, Part{i}, s, dt));
  }
  bool list = t == "aten.cat.default" || t == "aten.stack.default";
  if (list || (!args_.empty() && complexArg(args_[0])))
    if (Node *r = shapeOp(t)) return finish(r);
  fail("this op is not supported on complex values; aotc computes complex tensors as (re, im) pairs in: "
       "_fft_r2c, _fft_c2r, _fft_c2c, view_as_real, view_as_complex, add, sub, mul, div, neg, _conj, abs, angle, "
       "exp, real, imag, complex, polar, mm, bmm, where, sum, mean, _to_copy, clone, zeros_like, full, copy, "
       "slice_scatter and the shape ops (view, "
       "reshape, permute, transpose, unsqueeze, squeeze, select, slice, expand, cat, stack, flip, roll, "
       "constant_pad_nd, index_select) (docs/complex.md)");
}

} // namespace

bool isComplexOnlyTarget(const std::string &t) { return complexOnly().count(t) != 0; }

EnumLit complexDTypeLit(DType real) {
  return EnumLit{real == DType::F64 ? "torch.complex128" : "torch.complex64"};
}

EnumLit complexNumberLit(double re, double im) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "complex(%.17g, %.17g)", re, im);
  return EnumLit{buf};
}

bool needsComplexLowering(const ComplexCall &c, const std::function<bool(const Node *)> &isComplex) {
  if (c.target.rfind("aten._fft_", 0) == 0) return false; // defined on the pairs
  if (c.resultComplex || isComplexOnlyTarget(c.target)) return true;
  auto check = [&](const Arg &a) {
    if (isComplexDType(a) || complexNumber(a)) return true;
    if (auto *n = std::get_if<Node *>(&a)) return *n && isComplex(*n);
    if (auto *l = std::get_if<std::vector<Node *>>(&a))
      for (Node *x : *l)
        if (x && isComplex(x)) return true;
    return false;
  };
  for (const Arg &a : c.args)
    if (check(a)) return true;
  for (const auto &kv : c.kwargs)
    if (check(kv.second)) return true;
  return false;
}

Node *lowerComplexCall(Graph &g, const ComplexCall &c, const std::function<bool(const Node *)> &isComplex) {
  return Lowering(g, c, isComplex).run();
}

} // namespace aotc::complex_values
