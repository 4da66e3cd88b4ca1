//===- Profile.cpp - Per-kernel time of a context, against measured ceilings -===//
//
// ProgramContext (runtime.h) and the profile report (docs/profiling.md). A profiled context
// has 2 * num_kernels counters attached (abi.h aotc_profile_attach_fn): the object adds each
// kernel's nanoseconds and calls. When the context is destroyed the report divides the
// kernel table's static costs (aotc_kernel_desc: bytes, FLOPs, a GEMM's shape) by the time
// and compares with this machine's ceilings, measured then, at the thread count the kernels
// ran with (libomp's omp_get_max_threads):
// Both are measured once per process for each thread count (and shape), at the first report
// that needs them:
//  * memory: the STREAM triad a[i] = b[i] + s*c[i] over three 128 MiB float arrays, one slice
//    per thread (std::jthread), the median of 8 passes, counting 12 bytes per element as STREAM
//    does (tools/bench/stream_triad.c's sizes, the ceiling of the benchmark docs);
//  * a GEMM (and a convolution, through the GEMM of the same work): one cblas_sgemm /
//    cblas_dgemm call of the process's OpenBLAS at that shape and transposes with OpenBLAS
//    at that many threads, best of at least 3 calls and 20 ms; pinned back to 1 thread after;
//    for f32, oneDNN's dnnl_sgemm too when the process has libdnnl, and the faster of the two.
// The libraries are found with dlopen(RTLD_NOLOAD) first (what the process already has);
// without them the report says which ceiling it lacks.
//===----------------------------------------------------------------------===//
#include "Internal.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

namespace aotc::rt {

namespace {

std::mutex registryMutex;
std::string profileSpec; // setProfile's; "" = the environment's
std::set<detail::Profile *> live;

std::string currentSpec() {
  std::lock_guard<std::mutex> lock(registryMutex);
  if (!profileSpec.empty()) return profileSpec;
  const char *e = std::getenv("AOTC_PROFILE");
  return e ? e : "";
}

/// A symbol of an already loaded library (RTLD_NOLOAD), else of the library loaded now.
void *librarySymbol(const char *lib, const char *sym) {
  void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
  return h ? dlsym(h, sym) : nullptr;
}

int kernelThreads() {
  // libomp's VERSION-versioned definition: the one generated code calls (docs/runtime.md).
  void *h = dlopen("libomp.so.5", RTLD_LAZY | RTLD_NOLOAD);
  auto f = h ? reinterpret_cast<int (*)()>(dlsym(h, "omp_get_max_threads")) : nullptr;
  return f ? std::max(f(), 1) : 1;
}

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

/// The ceilings are measured once per process (per thread count, size and shape), whatever
/// the number of reports: every measurement and lookup holds this lock, so two reports never
/// measure at once either.
std::mutex ceilingMutex;

/// STREAM triad, bytes per second, at `threads` threads: tools/bench/stream_triad.c's sizes
/// (f32, 3 x 128 MiB, well past the last-level cache) and statistic (the median of 8 passes
/// after an untimed one), one contiguous slice per thread, first-touched by that thread.
double triadBandwidth(int threads) {
  // AOTC_PROFILE_TRIAD_MIB: MiB per array (default 128); the tests use a small one, since
  // under a sanitizer the triad's instrumented loops take seconds.
  size_t mib = 128;
  if (const char *e = std::getenv("AOTC_PROFILE_TRIAD_MIB")) mib = (size_t)std::clamp(std::atol(e), 1L, 4096L);
  std::lock_guard<std::mutex> lock(ceilingMutex);
  static std::map<std::pair<int, size_t>, double> measured;
  auto it = measured.find({threads, mib});
  if (it != measured.end()) return it->second;
  const size_t n = mib * 1024 * 1024 / sizeof(float);
  std::unique_ptr<float[]> a(new float[n]), b(new float[n]), c(new float[n]);
  auto run = [&](bool init) {
    std::vector<std::jthread> ts; // joined on every exit, an exception's too
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        size_t lo = n * t / threads, hi = n * (t + 1) / threads;
        float *pa = a.get(), *pb = b.get(), *pc = c.get();
        if (init)
          for (size_t i = lo; i < hi; ++i) pa[i] = 0, pb[i] = 1.0f, pc[i] = 2.0f;
        else
          for (size_t i = lo; i < hi; ++i) pa[i] = pb[i] + 3.0f * pc[i];
      });
    for (auto &t : ts) t.join();
  };
  run(true);
  run(false);
  std::vector<double> times;
  for (int r = 0; r < 8; ++r) {
    auto t0 = Clock::now();
    run(false);
    times.push_back(seconds(t0, Clock::now()));
  }
  std::sort(times.begin(), times.end());
  return measured[{threads, mib}] = 12.0 * (double)n / ((times[3] + times[4]) / 2);
}

/// FLOP/s of one library GEMM call at this shape (0 when there is no library; f32: the faster
/// of OpenBLAS and oneDNN when the process has oneDNN).
class GemmCeilings {
public:
  explicit GemmCeilings(int threads) : threads_(threads) {
    sgemm_ = librarySymbol("libopenblas.so.0", "cblas_sgemm");
    // oneDNN's f32 GEMM, which objects call for some GEMMs (docs/stage-codegen.md "GEMM
    // libraries"): an f32 ceiling is the better of the two libraries at the shape.
    if (void *h = dlopen("libdnnl.so.2", RTLD_LAZY | RTLD_NOLOAD)) // only when already loaded
      dnnlSgemm_ = dlsym(h, "dnnl_sgemm");
    dgemm_ = librarySymbol("libopenblas.so.0", "cblas_dgemm");
    setThreads_ = reinterpret_cast<void (*)(int)>(librarySymbol("libopenblas.so.0", "openblas_set_num_threads"));
    auto get = reinterpret_cast<int (*)()>(librarySymbol("libopenblas.so.0", "openblas_get_num_threads"));
    before_ = get ? get() : 1;
  }
  ~GemmCeilings() {
    if (setThreads_) setThreads_(before_); // the caller's setting (the runtime's is 1)
  }
  bool available() const { return sgemm_ && dgemm_; }
  bool hasOneDnn() const { return dnnlSgemm_ != nullptr; }
  double rate(const aotc_kernel_desc &d) {
    std::lock_guard<std::mutex> lock(ceilingMutex);
    static std::map<std::tuple<int, int, int, int64_t, int64_t, int64_t>, double> measured;
    auto key = std::make_tuple(threads_, d.dtype, d.trans, d.m, d.n, d.k);
    auto it = measured.find(key);
    if (it != measured.end()) return it->second;
    return measured[key] = measure(d);
  }

private:
  double measure(const aotc_kernel_desc &d) {
    if (!available() || d.m <= 0 || d.n <= 0 || d.k <= 0) return 0;
    // Operands over 256 MiB (a large convolution's GEMM of the same work) get no ceiling.
    if ((double)(d.m * d.k + d.k * d.n + d.m * d.n) * (d.dtype == AOTC_F64 ? 8 : 4) > 256.0 * 1024 * 1024) return 0;
    if (setThreads_) setThreads_(threads_);
    bool ta = d.trans & 1, tb = d.trans & 2, f64 = d.dtype == AOTC_F64;
    const int64_t m = d.m, n = d.n, k = d.k;
    int lda = (int)(ta ? m : k), ldb = (int)(tb ? k : n), ldc = (int)n;
    std::vector<double> a64, b64, c64;
    std::vector<float> a32, b32, c32;
    if (f64)
      a64.assign(m * k, 0.5), b64.assign(k * n, 0.25), c64.assign(m * n, 0);
    else
      a32.assign(m * k, 0.5f), b32.assign(k * n, 0.25f), c32.assign(m * n, 0);
    using S = void (*)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int);
    using D = void (*)(int, int, int, int, int, int, double, const double *, int, const double *, int, double, double *,
                       int);
    auto call = [&] {
      // CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112
      if (f64)
        reinterpret_cast<D>(dgemm_)(101, ta ? 112 : 111, tb ? 112 : 111, (int)m, (int)n, (int)k, 1.0, a64.data(), lda,
                                    b64.data(), ldb, 0.0, c64.data(), ldc);
      else
        reinterpret_cast<S>(sgemm_)(101, ta ? 112 : 111, tb ? 112 : 111, (int)m, (int)n, (int)k, 1.0f, a32.data(), lda,
                                    b32.data(), ldb, 0.0f, c32.data(), ldc);
    };
    // dnnl_sgemm (row-major, 'N'/'T'; oneDNN threads itself on omp_get_max_threads(): this
    // thread's libomp nthreads-var, the kernels' thread count, in aotc's processes; in one
    // where torch's libgomp serves libdnnl, that runtime's count: docs/profiling.md).
    using Dnnl = int (*)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *, int64_t,
                         float, float *, int64_t);
    auto callDnnl = [&] {
      reinterpret_cast<Dnnl>(dnnlSgemm_)(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a32.data(), lda, b32.data(),
                                         ldb, 0.0f, c32.data(), ldc);
    };
    auto fastest = [](auto &&f) {
      f();
      double best = 1e30, total = 0;
      for (int r = 0; r < 200 && (r < 3 || total < 0.02); ++r) {
        auto t0 = Clock::now();
        f();
        double s = seconds(t0, Clock::now());
        best = std::min(best, s), total += s;
      }
      return best;
    };
    double best = fastest(call);
    if (!f64 && dnnlSgemm_) best = std::min(best, fastest(callDnnl));
    return 2.0 * (double)m * (double)n * (double)k / best;
  }
  int threads_;
  void *sgemm_ = nullptr, *dgemm_ = nullptr, *dnnlSgemm_ = nullptr;
  void (*setThreads_)(int) = nullptr;
  int before_ = 1;
};

/// The entry of `name` in `graphs`, made (in table order) when missing.
template <class V> typename V::value_type::second_type &graphOf(V &graphs, const std::string &name) {
  for (auto &g : graphs)
    if (g.first == name) return g.second;
  graphs.push_back({name, {}});
  return graphs.back().second;
}

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

} // namespace

namespace detail {

struct Profile {
  const aotc_program *program = nullptr;
  std::string spec, owner;
  std::vector<int64_t> counters;

  void report() const;
};

void Profile::report() const {
  const aotc_program &p = *program;
  struct Row {
    int index;
    int64_t ns, calls;
  };
  std::vector<Row> rows;
  int64_t totalNs = 0;
  for (int i = 0; i < p.num_kernels; ++i)
    if (counters[2 * i + 1] > 0) {
      rows.push_back({i, counters[2 * i], counters[2 * i + 1]});
      totalNs += counters[2 * i];
    }
  // Per graph, in the kernel table's order: ns, calls (the most of any of its kernels).
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> graphs;
  for (const Row &r : rows) {
    auto &g = graphOf(graphs, p.kernels[r.index].graph ? p.kernels[r.index].graph : "?");
    g.first += r.ns;
    g.second = std::max(g.second, r.calls);
  }
  if (rows.empty()) return; // no kernel ran since the last reset: nothing to say
  std::stable_sort(rows.begin(), rows.end(), [](const Row &a, const Row &b) { return a.ns > b.ns; });
  const int threads = kernelThreads();
  const double triad = triadBandwidth(threads);
  GemmCeilings gemm(threads);

  nlohmann::json j;
  j["program"] = progName(p);
  j["owner"] = owner;
  j["threads"] = threads;
  j["triad_gb_per_s"] = triad / 1e9;
  j["gemm_library"] = !gemm.available()   ? ""
                      : gemm.hasOneDnn() ? "the faster of OpenBLAS cblas_sgemm and oneDNN dnnl_sgemm; cblas_dgemm"
                                         : "OpenBLAS cblas_sgemm/cblas_dgemm";
  nlohmann::json ks = nlohmann::json::array();
  for (const Row &r : rows) {
    const aotc_kernel_desc &d = p.kernels[r.index];
    double s = (double)r.ns * 1e-9, gbs = (double)d.bytes * (double)r.calls / s / 1e9,
           gflops = d.flops * (double)r.calls / s / 1e9, ceiling = -1;
    std::string kind = d.kind ? d.kind : "?";
    if (kind == "gemm" || kind == "conv") {
      double rate = gemm.rate(d);
      if (rate > 0) ceiling = gflops * 1e9 / rate;
    } else if (kind == "loop") {
      ceiling = gbs * 1e9 / triad;
    }
    ks.push_back({{"graph", d.graph ? d.graph : ""},
                  {"kernel", d.name ? d.name : ""},
                  {"kind", kind},
                  {"ops", d.ops ? d.ops : ""},
                  {"calls", r.calls},
                  {"ns", r.ns},
                  {"bytes", d.bytes},
                  {"flops", d.flops},
                  {"gb_per_s", gbs},
                  {"gflop_per_s", gflops},
                  {"ceiling", ceiling < 0 ? nlohmann::json(nullptr) : nlohmann::json(ceiling)},
                  {"shape", {d.m, d.n, d.k, d.batch}},
                  {"trans", d.trans}});
  }
  // Table rows never timed (a graph not called, e.g. eval under a Trainer; or a kernel that
  // does nothing): what a check compares with the kernels that should have run.
  j["untimed"] = nlohmann::json::array();
  for (int i = 0; i < p.num_kernels; ++i)
    if (counters[2 * i + 1] == 0)
      j["untimed"].push_back({p.kernels[i].graph ? p.kernels[i].graph : "", p.kernels[i].name ? p.kernels[i].name : ""});
  j["kernels"] = ks;
  j["graphs"] = nlohmann::json::array();
  for (auto &[name, g] : graphs) j["graphs"].push_back({{"graph", name}, {"ns", g.first}, {"calls", g.second}});

  if (spec != "1") {
    FILE *f = std::fopen(spec.c_str(), "a");
    if (!f) {
      std::fprintf(stderr, "aotc: warning: AOTC_PROFILE: cannot open '%s': %s; the profile of %s is lost\n",
                   spec.c_str(), std::strerror(errno), progName(p).c_str());
      return;
    }
    std::string line = j.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), f);
    std::fclose(f);
    return;
  }
  std::string out = "aotc profile: " + progName(p) + " (" + owner + "), " + std::to_string(threads) + " thread" +
                    (threads == 1 ? "" : "s") + "; ceilings: STREAM triad " + fmt("%.1f", triad / 1e9) +
                    " GB/s, GEMMs: " + (!gemm.available()   ? "none (no OpenBLAS in the process)"
                                         : gemm.hasOneDnn() ? "OpenBLAS and oneDNN at each shape"
                                                            : "OpenBLAS at each shape") +
                    "\n";
  for (auto &[name, g] : graphs)
    out += "  " + name + ": " + std::to_string(g.second) + " calls, " +
           fmt("%.3f", (double)g.first / 1e6 / (double)std::max<int64_t>(g.second, 1)) + " ms of kernels per call\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %6s %10s %7s %9s %9s %8s %9s %6s  %-10s %-6s %-6s %s\n", "time%", "us/call", "calls",
                "MB/call", "MFLOP/c", "GB/s", "GFLOP/s", "ceil%", "graph", "kernel", "kind", "ops [m n k batch]");
  out += line;
  size_t top = 25;
  if (const char *t = std::getenv("AOTC_PROFILE_TOP")) top = (size_t)std::max(1L, std::strtol(t, nullptr, 10));
  for (size_t i = 0; i < rows.size() && i < top; ++i) {
    const Row &r = rows[i];
    const nlohmann::json &k = ks[i];
    const aotc_kernel_desc &d = p.kernels[r.index];
    std::string what = d.ops ? d.ops : "";
    if (d.m > 0)
      what += " [" + std::to_string(d.m) + " " + std::to_string(d.n) + " " + std::to_string(d.k) + " " +
              std::to_string(d.batch) + "]";
    std::string ceil = k["ceiling"].is_null() ? "-" : fmt("%.0f", 100.0 * k["ceiling"].get<double>());
    std::snprintf(line, sizeof line, "  %6.1f %10.1f %7lld %9.3f %9.3f %8.2f %9.2f %6s  %-10s %-6s %-6s %s\n",
                  100.0 * (double)r.ns / (double)std::max<int64_t>(totalNs, 1),
                  (double)r.ns / 1e3 / (double)r.calls, (long long)r.calls, (double)d.bytes / 1e6, d.flops / 1e6,
                  k["gb_per_s"].get<double>(),
                  k["gflop_per_s"].get<double>(), ceil.c_str(), d.graph ? d.graph : "?", d.name ? d.name : "?",
                  k["kind"].get<std::string>().c_str(), what.substr(0, 200).c_str());
    out += line;
  }
  if (rows.size() > top) {
    int64_t rest = 0;
    for (size_t i = top; i < rows.size(); ++i) rest += rows[i].ns;
    out += "  (" + std::to_string(rows.size() - top) + " more kernels: " +
           fmt("%.1f", 100.0 * (double)rest / (double)std::max<int64_t>(totalNs, 1)) + " % of the time; AOTC_PROFILE_TOP=N shows more)\n";
  }
  std::fputs(out.c_str(), stderr);
}

} // namespace detail

void setProfile(const std::string &spec) {
  std::lock_guard<std::mutex> lock(registryMutex);
  profileSpec = spec;
}

void resetProfiles() {
  std::lock_guard<std::mutex> lock(registryMutex);
  for (detail::Profile *p : live) std::fill(p->counters.begin(), p->counters.end(), 0);
}

ProgramContext::ProgramContext() noexcept = default;

ProgramContext::ProgramContext(const aotc_program &program, const char *owner) : program_(&program) {
  ctx_ = program.context_create();
  if (!ctx_)
    throw RuntimeError("aotc runtime: " + detail::progName(program) + "_context_create failed (out of memory)",
                       AOTC_RT_ERROR_NOMEM);
  try {
    std::string spec = currentSpec();
    if (spec.empty() || spec == "0") return;
    if (!program.profile_attach || program.num_kernels <= 0) {
      std::fprintf(stderr, "aotc: warning: AOTC_PROFILE: %s has no kernel table (no kernels, or a CUDA object's "
                           "base); not profiled\n",
                   detail::progName(program).c_str());
      return;
    }
    auto prof = std::make_unique<detail::Profile>();
    prof->program = &program;
    prof->spec = spec;
    prof->owner = owner;
    prof->counters.assign(2 * (size_t)program.num_kernels, 0);
    {
      std::lock_guard<std::mutex> lock(registryMutex);
      live.insert(prof.get());
    }
    profile_ = std::move(prof);
  } catch (...) {
    close(); // out of memory: no context left behind
    throw;
  }
  if (program.profile_attach(ctx_, profile_->counters.data()) != 0) {
    close();
    throw RuntimeError("aotc runtime: " + detail::progName(program) + ": profile_attach refused its own context",
                       AOTC_RT_ERROR_ABI);
  }
}

ProgramContext::ProgramContext(ProgramContext &&o) noexcept
    : program_(o.program_), ctx_(o.ctx_), profile_(std::move(o.profile_)) {
  o.ctx_ = nullptr;
}

ProgramContext &ProgramContext::operator=(ProgramContext &&o) noexcept {
  if (this != &o) {
    close();
    program_ = o.program_, ctx_ = o.ctx_, profile_ = std::move(o.profile_);
    o.ctx_ = nullptr;
  }
  return *this;
}

ProgramContext::~ProgramContext() { close(); }

void ProgramContext::close() noexcept {
  if (profile_) {
    {
      std::lock_guard<std::mutex> lock(registryMutex);
      live.erase(profile_.get());
    }
    try {
      profile_->report();
    } catch (const std::exception &e) {
      std::fprintf(stderr, "aotc: warning: the profile of %s was not written: %s\n",
                   detail::progName(*program_).c_str(), e.what());
    }
    program_->profile_attach(ctx_, nullptr);
    profile_.reset();
  }
  if (ctx_) program_->context_destroy(ctx_);
  ctx_ = nullptr;
}

} // namespace aotc::rt
