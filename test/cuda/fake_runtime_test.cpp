//===- fake_runtime_test.cpp - A CUDA object against a recording runtime ----===//
//
// Links one model twice: <m>_cuda.o (aotc --target=cuda) and <m>_cpu.o (the CPU
// target), plus this file, which defines a *recording fake* of the runtime the
// CUDA object imports (aotc_cuda_launch, aotc_cuda_matmul; abi.h) and of
// cblas_sgemm/cblas_dgemm and aotc_onednn_sgemm for the CPU object (a naive GEMM, so the CPU step
// still computes). No GPU, no CUDA library: the CUDA entry points run on host
// memory (256-byte aligned), and nothing they pass is dereferenced.
//
// Checked against the --emit=kernels text of the CUDA object (argv[1]) and of the CPU object
// (argv[2], for the GEMM blocks of its schedule):
//  * launches happen in kernel order, one per kernel with a `schedule=[cuda=` mapping, with
//    that line's grid= and block=, and a GEMM call after each gemm kernel;
//  * every kernel argument is the address of the right buffer: in[i]/out[i]/
//    tangents[i]/grads[i] or saved/scratch + the offset of the `buffers:` line, in
//    ascending buffer id, then exec->error_word for `checked` kernels;
//  * each GEMM has the m/n/k/ld/transposes/alpha/beta of the CPU target's BLAS
//    calls for that kernel (whose row or column blocks add up to m or n), and the
//    same operands (region and offset);
//  * a misaligned pointer returns the error naming the tensor before any launch;
//    a failing runtime call is returned at once; the descriptor is complete.
// Exit 0 when every check passes, 1 otherwise (each failure printed).
//===----------------------------------------------------------------------===//
#include "aotc/abi.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

extern "C" const aotc_cuda_program AOTC_CUDA_PROGRAM;
extern "C" const aotc_program AOTC_CPU_PROGRAM;

namespace {

int failures = 0;
#define EXPECT(cond, msg)                                                                          \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      ++failures;                                                                                  \
      std::ostringstream os_;                                                                      \
      os_ << msg;                                                                                  \
      std::fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, os_.str().c_str());  \
    }                                                                                              \
  } while (0)

// ---- what the fakes record ------------------------------------------------------------
struct Event {
  enum Kind { Launch, Gemm } kind;
  std::string name;
  uint32_t grid = 0, block = 0;
  std::vector<const void *> args; // launch arguments (pointer values)
  aotc_cuda_gemm_desc gemm{};
  const void *a = nullptr, *b = nullptr;
  void *c = nullptr;
  const aotc_cuda_exec *exec = nullptr;
};
std::vector<Event> events;
std::map<std::string, size_t> argCount; // kernel symbol -> pointer arguments (from the text)
int failAt = -1;                        // make the failAt-th runtime call fail (-1: never)

struct BlasCall {
  bool rowMajor;
  bool transA, transB;
  int m, n, k, lda, ldb, ldc;
  double alpha, beta;
  const void *a, *b, *c;
};
std::mutex blasMutex;
std::vector<BlasCall> blasCalls;

int nextResult() {
  int n = (int)events.size() - 1;
  return n == failAt ? -1 : 0;
}

template <typename T>
void naiveGemm(int order, int ta, int tb, int M, int N, int K, T alpha, const T *A, int lda, const T *B,
               int ldb, T beta, T *C, int ldc) {
  {
    std::lock_guard<std::mutex> g(blasMutex);
    blasCalls.push_back({order == 101, ta == 112, tb == 112, M, N, K, lda, ldb, ldc, (double)alpha,
                         (double)beta, A, B, C});
  }
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      T acc = 0;
      for (int p = 0; p < K; ++p)
        acc += (ta == 112 ? A[p * lda + i] : A[i * lda + p]) * (tb == 112 ? B[j * ldb + p] : B[p * ldb + j]);
      C[i * ldc + j] = alpha * acc + (beta == 0 ? T(0) : beta * C[i * ldc + j]);
    }
}

} // namespace

extern "C" {
int aotc_cuda_launch(const aotc_cuda_exec *exec, const aotc_cuda_module *module, int32_t kernel, uint32_t grid,
                     uint32_t block, void **args) {
  Event e{Event::Launch};
  e.exec = exec;
  e.name = kernel >= 0 && kernel < module->num_kernels ? module->kernel_names[kernel] : "<bad index>";
  e.grid = grid;
  e.block = block;
  auto it = argCount.find(e.name);
  size_t n = it == argCount.end() ? 0 : it->second;
  for (size_t i = 0; i < n; ++i) e.args.push_back(*(void *const *)args[i]);
  events.push_back(e);
  return nextResult();
}
int aotc_cuda_matmul(const aotc_cuda_exec *exec, const aotc_cuda_gemm_desc *g, const void *a, const void *b,
                     void *c) {
  Event e{Event::Gemm};
  e.exec = exec;
  e.name = g->name;
  e.gemm = *g;
  e.a = a;
  e.b = b;
  e.c = c;
  events.push_back(e);
  return nextResult();
}
void cblas_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc) {
  naiveGemm<float>(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void aotc_onednn_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc) {
  naiveGemm<float>(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void cblas_dgemm(int order, int ta, int tb, int M, int N, int K, double alpha, const double *A, int lda,
                 const double *B, int ldb, double beta, double *C, int ldc) {
  naiveGemm<double>(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
}

namespace {

// ---- the --emit=kernels text -----------------------------------------------------------
struct KernelLine {
  std::string name;
  bool gemm = false, checked = false, launched = false;
  uint32_t grid = 0, block = 0;
  uint32_t finalGrid = 0, finalBlock = 0; // split-row: the second kernel's launch
  std::string partials;                   // split-row: "scratch+<offset>"
  int64_t gemmBlocks = 1, m = 0, n = 0, batch = 1;
  bool gemmParallel = false, gemmLastAlone = false; // the CPU schedule's `parallel`, `last=alone`
  bool gemmOneDnn = false;                          // ... and `lib=onednn`
  std::vector<std::string> reads, writes;
  /// The distinct buffers read or written, in buffer-id order: the kernel's pointer arguments.
  std::vector<std::string> args;
  /// Arguments the host passes: args, then exec->error_word when checked, then the partials.
  size_t pointerArgs() const { return args.size() + (checked ? 1 : 0) + (finalGrid ? 1 : 0); }
};
struct GraphText {
  std::vector<KernelLine> kernels;
  std::vector<std::pair<std::string, std::string>> buffers; // name -> location, buffer-id order
};

std::vector<std::string> list(const std::string &line, const std::string &key) {
  std::vector<std::string> out;
  size_t p = line.find(" " + key + "=[");
  if (p == std::string::npos) return out;
  p += key.size() + 3;
  size_t e = line.find(']', p);
  std::stringstream ss(line.substr(p, e - p));
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(' '));
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int64_t num(const std::string &line, const std::string &key, int64_t dflt) {
  std::smatch m;
  std::regex re(" " + key + "=([0-9]+)");
  return std::regex_search(line, m, re) ? std::stoll(m[1]) : dflt;
}

/// Buffer name -> buffer id (its place in the `buffers:` line). A name two buffers share is
/// written `name@place` in a kernel's reads/writes (the place without brackets: getitem@out1,
/// getitem@saved+64), so both spellings are keys.
std::map<std::string, size_t> bufferIds(const GraphText &gt) {
  std::map<std::string, size_t> id;
  for (size_t i = 0; i < gt.buffers.size(); ++i) {
    std::string place = gt.buffers[i].second;
    std::erase_if(place, [](char c) { return c == '[' || c == ']'; });
    id[gt.buffers[i].first] = i;
    id[gt.buffers[i].first + "@" + place] = i;
  }
  return id;
}

std::map<std::string, GraphText> parseKernels(const std::string &path) {
  std::ifstream f(path);
  std::map<std::string, GraphText> out;
  std::string line, graph;
  while (std::getline(f, line)) {
    std::smatch gm;
    if (std::regex_search(line, gm, std::regex("^# (\\w+): [0-9]+ kernels"))) graph = gm[1]; // forward, backward, eval
    else if (line.rfind("# " + graph + " buffers:", 0) == 0) {
      std::stringstream ss(line.substr(line.find(':') + 1));
      std::string item;
      while (ss >> item) {
        size_t eq = item.rfind('=');
        out[graph].buffers.push_back({item.substr(0, eq), item.substr(eq + 1)});
      }
    } else if (line.rfind("kernel ", 0) == 0) {
      KernelLine k;
      k.name = line.substr(7, line.find(':') - 7);
      k.gemm = line.find(": gemm ") != std::string::npos;
      k.checked = line.find(" checked") != std::string::npos;
      k.launched = line.find(" schedule=[cuda=") != std::string::npos && line.find(" grid=0 ") == std::string::npos;
      k.grid = (uint32_t)num(line, "grid", 0);
      k.block = (uint32_t)num(line, "block", 0);
      k.m = num(line, "m", 0);
      k.n = num(line, "n", 0);
      k.batch = num(line, "batch", 1);
      std::smatch bm;
      if (std::regex_search(line, bm, std::regex("[ []blocks=([0-9]+)x"))) k.gemmBlocks = std::stoll(bm[1]);
      k.gemmParallel = std::regex_search(line, std::regex(" gemm .*schedule=\\[[^\\]]*parallel"));
      k.gemmOneDnn = line.find(" lib=onednn") != std::string::npos;
      k.gemmLastAlone = line.find(" last=alone") != std::string::npos;
      std::smatch fm;
      if (std::regex_search(line, fm, std::regex(" final=([0-9]+)x([0-9]+) partials=(scratch\\+[0-9]+)"))) {
        k.finalGrid = (uint32_t)std::stoul(fm[1]);
        k.finalBlock = (uint32_t)std::stoul(fm[2]);
        k.partials = fm[3];
      }
      k.reads = list(line, "reads");
      k.writes = list(line, "writes");
      out[graph].kernels.push_back(k);
    }
  }
  for (auto &[graph, gt] : out) { // the buffers line follows the kernel lines
    std::map<std::string, size_t> id = bufferIds(gt);
    for (KernelLine &k : gt.kernels) {
      k.args = k.reads;
      k.args.insert(k.args.end(), k.writes.begin(), k.writes.end());
      std::sort(k.args.begin(), k.args.end(), [&](auto &x, auto &y) { return id.at(x) < id.at(y); });
      k.args.erase(std::unique(k.args.begin(), k.args.end()), k.args.end());
    }
  }
  return out;
}

// ---- host "device" memory ---------------------------------------------------------------
struct Region {
  std::string name;
  const char *base;
  int64_t bytes;
};

void *alloc256(int64_t bytes) {
  size_t n = (size_t)std::max<int64_t>(256, (bytes + 255) / 256 * 256);
  void *p = std::aligned_alloc(256, n);
  std::memset(p, 0, n);
  return p;
}

struct Buffers {
  std::vector<void *> in, out, tangents, grads;
  void *saved = nullptr, *scratch = nullptr;
  std::vector<Region> regions;

  explicit Buffers(const aotc_program &p) {
    for (int i = 0; i < p.num_inputs; ++i) {
      in.push_back(alloc256(p.inputs[i].bytes));
      fill(p.inputs[i], in.back());
      regions.push_back({"in[" + std::to_string(i) + "]", (char *)in.back(), p.inputs[i].bytes});
    }
    for (int i = 0; i < p.num_outputs; ++i) {
      out.push_back(alloc256(p.outputs[i].bytes));
      regions.push_back({"out[" + std::to_string(i) + "]", (char *)out.back(), p.outputs[i].bytes});
      tangents.push_back(alloc256(p.outputs[i].bytes));
      if (p.outputs[i].dtype == AOTC_F32)
        for (int64_t j = 0; j < p.outputs[i].numel; ++j) ((float *)tangents.back())[j] = 1.0f;
      regions.push_back({"tangents[" + std::to_string(i) + "]", (char *)tangents.back(), p.outputs[i].bytes});
    }
    for (int j = 0; j < p.num_grads; ++j) {
      grads.push_back(alloc256(p.grads[j].bytes));
      regions.push_back({"grads[" + std::to_string(j) + "]", (char *)grads.back(), p.grads[j].bytes});
    }
    saved = alloc256(p.saved_bytes);
    scratch = alloc256(p.scratch_bytes);
    regions.push_back({"saved", (char *)saved, p.saved_bytes});
    regions.push_back({"scratch", (char *)scratch, p.scratch_bytes});
  }
  ~Buffers() {
    for (auto *v : {&in, &out, &tangents, &grads})
      for (void *p : *v) std::free(p);
    std::free(saved);
    std::free(scratch);
  }
  /// Deterministic finite inputs; integer inputs in [0, 4) (valid class indices).
  static void fill(const aotc_tensor_desc &d, void *p) {
    uint32_t s = 12345;
    for (int64_t j = 0; j < d.numel; ++j) {
      s = s * 1664525u + 1013904223u;
      double u = (s >> 8) / double(1 << 24) - 0.5;
      switch (d.dtype) {
      case AOTC_F32: ((float *)p)[j] = (float)u; break;
      case AOTC_F64: ((double *)p)[j] = u; break;
      case AOTC_I64: ((int64_t *)p)[j] = (s >> 8) % 4; break;
      case AOTC_I32: ((int32_t *)p)[j] = (s >> 8) % 4; break;
      default: ((uint8_t *)p)[j] = 0; break;
      }
    }
  }
  /// "saved+128" for a pointer 128 bytes into saved; "?" outside every region.
  std::string where(const void *ptr) const {
    for (auto &r : regions)
      if ((const char *)ptr >= r.base && (const char *)ptr < r.base + std::max<int64_t>(r.bytes, 1))
        return r.name + "+" + std::to_string((const char *)ptr - r.base);
    return "?";
  }
  /// The address the `buffers:` line's location names.
  const void *at(const std::string &loc) const {
    if (loc == "none") return nullptr;
    size_t plus = loc.find('+');
    std::string reg = plus == std::string::npos ? loc : loc.substr(0, plus);
    int64_t off = plus == std::string::npos ? 0 : std::stoll(loc.substr(plus + 1));
    for (auto &r : regions)
      if (r.name == reg) return r.base + off;
    return nullptr;
  }
};

std::string programName() { return AOTC_CUDA_PROGRAM.base.name; }
/// "<program>_fwd_" / "<program>_bwd_": kernel symbols are this + the kernel name.
std::string symbolPrefix(const std::string &graph) { return programName() + (graph == "forward" ? "_fwd_" : "_bwd_"); }

/// Checks the recorded events of one entry point against its graph's text.
void checkGraph(const char *graph, const GraphText &gt, const Buffers &bufs, const aotc_cuda_exec &exec,
                const std::vector<BlasCall> &cpuCalls, const Buffers &cpuBufs) {
  std::string prefix = symbolPrefix(graph);
  std::map<std::string, size_t> id = bufferIds(gt);
  size_t ev = 0, cpu = 0;
  int launches = 0, gemms = 0;
  for (const KernelLine &k : gt.kernels) {
    std::string sym = prefix + k.name;
    if (k.launched) {
      ++launches;
      EXPECT(ev < events.size(), graph << ": missing launch of " << sym);
      if (ev >= events.size()) return;
      const Event &e = events[ev++];
      EXPECT(e.kind == Event::Launch && e.name == sym, graph << ": expected launch of " << sym << ", got " << e.name);
      EXPECT(e.grid == k.grid && e.block == k.block,
             sym << ": grid/block " << e.grid << "/" << e.block << " vs text " << k.grid << "/" << k.block);
      EXPECT(e.exec == &exec, sym << ": exec pointer");
      const std::vector<std::string> &names = k.args;
      // (How many arguments the fake reads comes from the same kernel line, so their number is
      // not checked here: check_ptx.py compares it with the PTX entry's parameters.)
      for (size_t i = 0; i < names.size() && i < e.args.size(); ++i) {
        const std::string &loc = gt.buffers[id.at(names[i])].second;
        EXPECT(e.args[i] == bufs.at(loc), sym << " argument " << i << " (" << names[i] << " = " << loc
                                              << ") points to " << bufs.where(e.args[i]));
      }
      size_t extra = names.size();
      if (k.checked && e.args.size() > extra)
        EXPECT(e.args[extra++] == (const void *)exec.error_word, sym << ": argument is not exec->error_word");
      if (k.finalGrid) {
        EXPECT(e.args.size() == extra + 1 && e.args.back() == bufs.at(k.partials),
               sym << ": last argument is not the partials at " << k.partials);
        // The second kernel: same arguments, one block per row.
        EXPECT(ev < events.size(), graph << ": missing launch of " << sym << "_final");
        if (ev >= events.size()) return;
        const Event &f = events[ev++];
        EXPECT(f.kind == Event::Launch && f.name == sym + "_final" && f.grid == k.finalGrid &&
                   f.block == k.finalBlock && f.args == e.args,
               sym << "_final: launch " << f.name << " " << f.grid << "x" << f.block);
        ++launches;
      }
    }
    if (k.gemm && k.m > 0 && k.n > 0) {
      ++gemms;
      EXPECT(ev < events.size(), graph << ": missing GEMM of " << sym);
      if (ev >= events.size()) return;
      const Event &e = events[ev++];
      EXPECT(e.kind == Event::Gemm && e.name == sym, graph << ": expected GEMM " << sym << ", got " << e.name);
      const aotc_cuda_gemm_desc &g = e.gemm;
      EXPECT(g.m == k.m && g.n == k.n && g.batch == k.batch, sym << ": m/n/batch vs text");
      EXPECT(g.allow_tf32 == 0, sym << ": TF32 without --allow-tf32");
      // The CPU target's calls for this kernel at 1 thread (MLIRGen.cpp buildGemmFunction): a
      // parallel GEMM's one thread makes one call per batch entry for all its blocks, plus one
      // for a last block that is alone; a serial one, and every oneDNN one, a call per block.
      int64_t calls = k.batch * (k.gemmBlocks == 1                       ? 1
                                 : !k.gemmParallel || k.gemmOneDnn ? k.gemmBlocks
                                 : k.gemmLastAlone                 ? 2
                                                                   : 1);
      EXPECT(cpu + calls <= cpuCalls.size(), sym << ": the CPU made fewer BLAS calls");
      if (cpu + calls > cpuCalls.size()) return;
      std::vector<BlasCall> mine(cpuCalls.begin() + cpu, cpuCalls.begin() + cpu + calls);
      cpu += calls;
      std::sort(mine.begin(), mine.end(), [](auto &x, auto &y) { return x.c < y.c; });
      const BlasCall &first = mine.front();
      int64_t msum = 0, nsum = 0;
      for (auto &c : mine) {
        EXPECT(c.rowMajor && c.transA == (bool)g.trans_a && c.transB == (bool)g.trans_b && c.k == g.k &&
                   c.lda == g.lda && c.ldb == g.ldb && c.ldc == g.ldc && c.alpha == g.alpha && c.beta == g.beta,
               sym << ": BLAS call (trans " << c.transA << c.transB << " k " << c.k << " ld " << c.lda << "/"
                   << c.ldb << "/" << c.ldc << ") vs cuda (trans " << g.trans_a << g.trans_b << " k " << g.k
                   << " ld " << g.lda << "/" << g.ldb << "/" << g.ldc << ")");
        msum += c.m;
        nsum += c.n;
      }
      bool rows = k.gemmBlocks == 1 || first.n == g.n; // blocks of rows keep n whole
      EXPECT((rows ? msum == g.m * k.batch && first.n == g.n : nsum == g.n * k.batch && first.m == g.m),
             sym << ": CPU blocks cover " << msum << "x" << nsum << ", cuda " << g.m << "x" << g.n);
      EXPECT(cpuBufs.where(first.a) == bufs.where(e.a) && cpuBufs.where(first.b) == bufs.where(e.b) &&
                 cpuBufs.where(first.c) == bufs.where(e.c),
             sym << ": operands cpu " << cpuBufs.where(first.a) << "," << cpuBufs.where(first.b) << ","
                 << cpuBufs.where(first.c) << " cuda " << bufs.where(e.a) << "," << bufs.where(e.b) << ","
                 << bufs.where(e.c));
    }
  }
  EXPECT(ev == events.size(), graph << ": " << events.size() - ev << " unexpected runtime calls");
  EXPECT(cpu == cpuCalls.size(), graph << ": " << cpuCalls.size() - cpu << " CPU BLAS calls not matched");
  std::printf("%s: %d launches, %d GEMMs match the kernel list and the CPU's BLAS calls\n", graph, launches, gemms);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <cuda --emit=kernels text> <cpu --emit=kernels text>\n", argv[0]);
    return 2;
  }
  setenv("OMP_NUM_THREADS", "1", 1);
  const aotc_cuda_program &cp = AOTC_CUDA_PROGRAM;
  const aotc_program &p = cp.base;
  auto text = parseKernels(argv[1]);
  // The CPU target's GEMM blocks (its schedule; the kernels are the same groups, by name).
  auto cpuText = parseKernels(argv[2]);
  for (const char *graph : {"forward", "backward"})
    for (auto &k : text[graph].kernels)
      for (auto &c : cpuText[graph].kernels)
        if (c.name == k.name) {
          k.gemmBlocks = c.gemmBlocks;
          k.gemmParallel = c.gemmParallel;
          k.gemmOneDnn = c.gemmOneDnn;
          k.gemmLastAlone = c.gemmLastAlone;
        }
  for (const char *graph : {"forward", "backward"})
    for (auto &k : text[graph].kernels) {
      std::string sym = symbolPrefix(graph) + k.name;
      argCount[sym] = k.pointerArgs();
      if (k.finalGrid) argCount[sym + "_final"] = argCount[sym];
    }

  // The descriptor.
  EXPECT(p.abi_version == AOTC_ABI_VERSION && p.forward == nullptr && cp.forward && cp.backward, "descriptor");
  EXPECT(std::string(cp.archs) == "sm_80,sm_90", "archs " << cp.archs);
  EXPECT(std::strstr(cp.tool_versions, "ptxas:") && std::strstr(cp.tool_versions, "fatbinary:"),
         "tool versions: " << cp.tool_versions);
  const aotc_cuda_module *mod = cp.module;
  int launchedKernels = 0;
  for (auto &g : text)
    for (auto &k : g.second.kernels) launchedKernels += k.launched + (k.finalGrid ? 1 : 0);
  EXPECT(mod && mod->num_kernels == launchedKernels, "module kernels " << mod->num_kernels << " vs " << launchedKernels);
  uint32_t magic = 0;
  std::memcpy(&magic, mod->fatbin, 4);
  EXPECT(magic == 0xba55ed50u && mod->fatbin_bytes > 1024, "fatbin magic " << std::hex << magic);
  EXPECT(mod->num_errors == p.num_errors && mod->errors == p.errors, "module error table");
  const aotc_program &cpu = AOTC_CPU_PROGRAM;
  EXPECT(p.saved_bytes == cpu.saved_bytes && p.num_inputs == cpu.num_inputs && p.num_grads == cpu.num_grads,
         "CUDA and CPU descriptors differ");

  // CPU reference run (records its BLAS calls).
  Buffers cb(cpu);
  aotc_context *cpuCtx = cpu.context_create();
  aotc_context *ctx = cp.base.context_create();
  EXPECT(cpuCtx && ctx, "context_create returned NULL");
  int rc = cpu.forward(cpuCtx, cb.in.data(), cb.out.data(), cb.saved, cb.scratch);
  EXPECT(rc == 0, "CPU forward returned " << rc);
  std::vector<BlasCall> cpuFwd = blasCalls;
  blasCalls.clear();
  rc = cpu.backward(cpuCtx, cb.in.data(), cb.saved, (const void *const *)cb.tangents.data(), cb.grads.data(), cb.scratch);
  EXPECT(rc == 0, "CPU backward returned " << rc);
  std::vector<BlasCall> cpuBwd = blasCalls;

  // The CUDA entry points on host memory.
  Buffers b(p);
  int64_t *errorWord = (int64_t *)alloc256(AOTC_CUDA_ERROR_WORD_BYTES);
  int64_t hostErrorValue = 0;
  aotc_cuda_exec exec{};
  exec.host_error_value = &hostErrorValue;
  exec.stream = (void *)0x1000;
  exec.error_word = errorWord;
  rc = cp.forward(ctx, b.in.data(), b.out.data(), b.saved, b.scratch, &exec);
  EXPECT(rc == 0, "forward returned " << rc);
  checkGraph("forward", text["forward"], b, exec, cpuFwd, cb);
  events.clear();
  rc = cp.backward(ctx, b.in.data(), b.saved, (const void *const *)b.tangents.data(), b.grads.data(), b.scratch, &exec);
  EXPECT(rc == 0, "backward returned " << rc);
  checkGraph("backward", text["backward"], b, exec, cpuBwd, cb);

  // A misaligned input: its error, before anything is enqueued.
  events.clear();
  int last = p.num_inputs - 1;
  void *saveIn = b.in[last];
  b.in[last] = (char *)saveIn + 64;
  rc = cp.forward(ctx, b.in.data(), b.out.data(), b.saved, b.scratch, &exec);
  std::string msg = rc > 0 && rc <= p.num_errors ? p.errors[rc - 1] : "";
  std::string want = "in[" + std::to_string(last) + "] '" + p.inputs[last].name + "'";
  EXPECT(msg.find(want) != std::string::npos && msg.find("256-byte aligned") != std::string::npos,
         "misaligned input: rc " << rc << " message '" << msg << "'");
  EXPECT(hostErrorValue == (int64_t)(intptr_t)b.in[last], "host_error_value is not the pointer");
  EXPECT(events.empty(), "launched before checking alignment");
  b.in[last] = saveIn;
  std::printf("misaligned: %s\n", msg.c_str());

  // A failing runtime call stops the entry point with its code.
  events.clear();
  failAt = 1;
  rc = cp.forward(ctx, b.in.data(), b.out.data(), b.saved, b.scratch, &exec);
  EXPECT(rc == -1 && events.size() == 2, "runtime failure: rc " << rc << ", " << events.size() << " calls");
  failAt = -1;

  // Another program's context (or none) is refused before anything is enqueued.
  events.clear();
  rc = cp.forward(cpuCtx, b.in.data(), b.out.data(), b.saved, b.scratch, &exec);
  EXPECT(rc == AOTC_ERROR_CONTEXT && events.empty(), "foreign context: rc " << rc);
  rc = cp.backward(nullptr, b.in.data(), b.saved, (const void *const *)b.tangents.data(), b.grads.data(), b.scratch, &exec);
  EXPECT(rc == AOTC_ERROR_CONTEXT && events.empty(), "NULL context: rc " << rc);
  // NULL arrays the call needs, or no exec, are refused before anything is read or enqueued.
  rc = cp.forward(ctx, nullptr, b.out.data(), b.saved, b.scratch, &exec);
  EXPECT(rc == AOTC_ERROR_NULL_ARGUMENT && events.empty(), "NULL in: rc " << rc);
  rc = cp.forward(ctx, b.in.data(), b.out.data(), b.saved, b.scratch, nullptr);
  EXPECT(rc == AOTC_ERROR_NULL_ARGUMENT && events.empty(), "NULL exec: rc " << rc);
  cp.base.context_destroy(ctx);
  cpu.context_destroy(cpuCtx);

  std::free(errorWord);
  std::printf("fake-runtime %s: %s (%d failures)\n", programName().c_str(), failures ? "FAILED" : "ok", failures);
  return failures ? 1 : 0;
}
