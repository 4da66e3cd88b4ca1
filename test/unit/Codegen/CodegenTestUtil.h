//===- CodegenTestUtil.h - Compile, link and call generated objects -------===//
//
// Test helper (not a public header): compiles a Program with compileProgram,
// writes the object to a temporary directory, links it into a shared library
// with `clang-19 -shared` (OpenBLAS, LLVM libomp, libm), dlopens it and calls
// the entry points through the <name>_program descriptor.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Codegen.h"
#include "aotc/OpRegistry.h"
#include "aotc/RefEval.h"
#include "aotc/abi.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace cgtest {
using namespace aotc;

inline TensorType T(DType d, Shape s) { return TensorType{d, std::move(s)}; }

/// A 64-byte aligned buffer.
struct Buf {
  std::shared_ptr<void> p;
  int64_t bytes = 0;
  explicit Buf(int64_t n = 0, unsigned char fill = 0) : bytes(n) {
    int64_t sz = std::max<int64_t>(64, (n + 63) / 64 * 64);
    p.reset(std::aligned_alloc(64, sz), std::free);
    std::memset(p.get(), fill, sz);
  }
  void *get() const { return p.get(); }
};

inline Buf toBuf(const RefTensor &t) {
  Buf b(t.numel() * itemSize(t.dtype));
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.data[i];
    switch (t.dtype) {
    case DType::F32: ((float *)b.get())[i] = (float)v; break;
    case DType::F64: ((double *)b.get())[i] = v; break;
    case DType::I64: ((int64_t *)b.get())[i] = (int64_t)v; break;
    case DType::Bool: ((uint8_t *)b.get())[i] = v != 0.0; break;
    case DType::I32: ((int32_t *)b.get())[i] = (int32_t)v; break;
    case DType::U8: ((uint8_t *)b.get())[i] = (uint8_t)v; break;
    }
  }
  return b;
}

inline RefTensor fromBuf(const Buf &b, const TensorType &t) {
  RefTensor r(t.dtype, t.shape);
  for (int64_t i = 0; i < r.numel(); ++i) {
    switch (t.dtype) {
    case DType::F32: r.data[i] = ((const float *)b.get())[i]; break;
    case DType::F64: r.data[i] = ((const double *)b.get())[i]; break;
    case DType::I64: r.data[i] = (double)((const int64_t *)b.get())[i]; break;
    case DType::Bool: r.data[i] = ((const uint8_t *)b.get())[i]; break;
    case DType::I32: r.data[i] = ((const int32_t *)b.get())[i]; break;
    case DType::U8: r.data[i] = ((const uint8_t *)b.get())[i]; break;
    }
  }
  return r;
}

/// max |a - b| / max(max |b|, 1e-30).
inline double relErr(const RefTensor &a, const RefTensor &b) {
  double num = 0, den = 1e-30;
  for (int64_t i = 0; i < b.numel(); ++i) {
    num = std::max(num, std::abs(a.data[i] - b.data[i]));
    den = std::max(den, std::abs(b.data[i]));
  }
  return num / den;
}

/// A compiled program loaded from a shared library.
struct Loaded {
  std::string dir;
  void *handle = nullptr;
  const aotc_program *prog = nullptr;
  Artifact art;
  ~Loaded() {
    if (handle) dlclose(handle);
    if (!dir.empty()) std::system(("rm -rf '" + dir + "'").c_str());
  }
};

/// Links L->art.object into a shared library and loads <name>_program from it.
inline void linkAndLoad(Loaded &L, const std::string &name) {
  char tmpl[] = "/tmp/aotc-cg-XXXXXX";
  L.dir = mkdtemp(tmpl);
  std::string obj = L.dir + "/k.o", so = L.dir + "/k.so";
  std::ofstream(obj, std::ios::binary)
      .write((const char *)L.art.object.data(), (std::streamsize)L.art.object.size());
  std::string cmd = "clang-19 -shared -o '" + so + "' '" + obj +
                    "' -lopenblas -L/usr/lib/llvm-19/lib -lomp -Wl,-rpath,/usr/lib/llvm-19/lib -lm";
  if (std::system(cmd.c_str()) != 0) return;
  L.handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!L.handle) return;
  L.prog = (const aotc_program *)dlsym(L.handle, (name + "_program").c_str());
}

inline std::unique_ptr<Loaded> compileAndLoad(const Program &p, CodegenOptions opts = {}) {
  auto L = std::make_unique<Loaded>();
  if (opts.name.empty()) opts.name = p.name;
  L->art = compileProgram(p, opts);
  linkAndLoad(*L, opts.name);
  return L;
}


/// Runs forward (and backward when tangents are given) of a loaded program.
struct RunResult {
  int fwdRc = -1, bwdRc = -1;
  int64_t errorValue = 0; ///< The failing call's value from its scratch (error_value_offset).
  std::vector<RefTensor> outputs, grads;
};

/// One buffer per descriptor of `descs` (bytes filled with `fill`) and their addresses.
template <class Ptr> struct BufList {
  std::vector<Buf> bufs;
  std::vector<Ptr> ptrs;
  void add(Buf b) {
    bufs.push_back(std::move(b));
    ptrs.push_back(bufs.back().get());
  }
};
template <class Ptr> BufList<Ptr> buffersFor(const aotc_tensor_desc *descs, int n, unsigned char fill) {
  BufList<Ptr> l;
  for (int i = 0; i < n; ++i) l.add(Buf(descs[i].bytes, fill));
  return l;
}

inline RunResult run(const Loaded &L, const std::vector<RefTensor> &inputs,
                     const std::vector<RefTensor> *tangents, unsigned char scratchFill = 0xff) {
  const aotc_program &P = *L.prog;
  RunResult r;
  BufList<const void *> inL;
  for (auto &t : inputs) inL.add(toBuf(t));
  std::vector<const void *> &inp = inL.ptrs;
  BufList<void *> outL = buffersFor<void *>(P.outputs, P.num_outputs, 0xcd);
  std::vector<Buf> &out = outL.bufs;
  std::vector<void *> &outp = outL.ptrs;
  Buf saved(P.saved_bytes, 0xab), scratch(P.scratch_bytes, scratchFill);
  std::unique_ptr<aotc_context, aotc_context_destroy_fn> ctx(P.context_create(), P.context_destroy);
  r.fwdRc = P.forward(ctx.get(), inp.data(), outp.data(), saved.get(), scratch.get());
  auto readError = [&] {
    if (P.error_value_offset >= 0)
      std::memcpy(&r.errorValue, static_cast<char *>(scratch.get()) + P.error_value_offset, 8);
  };
  if (r.fwdRc != 0) readError();
  for (int i = 0; i < P.num_outputs; ++i) {
    TensorType t{(DType)P.outputs[i].dtype, Shape(P.outputs[i].shape, P.outputs[i].shape + P.outputs[i].rank)};
    r.outputs.push_back(fromBuf(out[i], t));
  }
  if (!tangents || r.fwdRc != 0) return r;
  std::vector<Buf> tg;
  std::vector<const void *> tgp;
  for (auto &t : *tangents) {
    tg.push_back(toBuf(t));
    tgp.push_back(tg.back().get());
  }
  std::vector<Buf> gr;
  std::vector<void *> grp;
  for (int j = 0; j < P.num_grads; ++j) {
    gr.emplace_back(P.grads[j].bytes, 0xcd);
    grp.push_back(gr.back().get());
  }
  std::memset(scratch.get(), scratchFill, std::max<int64_t>(64, (P.scratch_bytes + 63) / 64 * 64));
  r.bwdRc = P.backward(ctx.get(), inp.data(), saved.get(), tgp.data(), grp.data(), scratch.get());
  if (r.bwdRc != 0) readError();
  for (int j = 0; j < P.num_grads; ++j) {
    TensorType t{(DType)P.grads[j].dtype, Shape(P.grads[j].shape, P.grads[j].shape + P.grads[j].rank)};
    r.grads.push_back(fromBuf(gr[j], t));
  }
  return r;
}

/// Number of kernels in a graph section of --emit=kernels text.
inline int countKernels(const std::string &text, const std::string &section) {
  auto pos = text.find("# " + section + ":");
  if (pos == std::string::npos) return -1;
  auto end = text.find("\n# ", pos + 1);
  std::string s = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  int n = 0;
  for (size_t p = s.find("\nkernel "); p != std::string::npos; p = s.find("\nkernel ", p + 1)) ++n;
  return n;
}

} // namespace cgtest
