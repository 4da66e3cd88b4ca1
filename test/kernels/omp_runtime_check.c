/*===- omp_runtime_check.c - One OpenMP runtime serves oneDNN (ctest kernels.*) -===*
 *
 * Debian's libdnnl is built with GNU OpenMP: it calls GOMP_parallel, omp_get_max_threads, ...
 * and needs libgomp.so.1. aotc links LLVM's libomp before libaotc_kernels (and so before
 * libdnnl and libgomp): libomp, which exports the GOMP_* entry points, is then first in the
 * lookup scope and serves oneDNN's calls too, so the process has one thread pool.
 *
 * This program, linked as aotc_link_step links a model, starts libomp's pool with its own
 * parallel region (clang -fopenmp=libomp: __kmpc_fork_call, which only libomp has), then runs
 * one f32 oneDNN convolution large enough for oneDNN to use every thread, and checks:
 *  1. dlsym(RTLD_DEFAULT, "GOMP_parallel") lies in libomp (the global lookup scope's first
 *     definition: the one libdnnl binds to);
 *  2. the convolution started no thread: /proc/self/task counts the same threads before and
 *     after (libaotc_kernels runs oneDNN inline in its own chunks with both runtimes' thread
 *     counts at 1, ConvDnnl.c; a oneDNN that threaded itself on libgomp would start a pool);
 *  3. omp_get_max_threads() is still OMP_NUM_THREADS after the call (the thread counts that
 *     libaotc_kernels lowers around oneDNN are restored).
 * Exit 0 and "one OpenMP runtime: ..." when all hold; exit 1 naming the failure otherwise.
 * Built a second time with libgomp linked first (omp_runtime_check_gomp_first), it must fail
 * check 1: the check can tell.
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE
#include "aotc/abi.h"
#include "aotc/kernels.h"

#include <dirent.h>
#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

int main(void) {
  int want = omp_get_max_threads();
  int seen = 0;
#pragma omp parallel
  {
#pragma omp atomic
    ++seen;
  }
  int before = threads();

  Dl_info info;
  void *gp = dlsym(RTLD_DEFAULT, "GOMP_parallel");
  const char *lib = gp && dladdr(gp, &info) && info.dli_fname ? info.dli_fname : "(not found)";

  aotc_conv_desc d = {AOTC_F32, AOTC_CONV_FORWARD, 4, 64, 64, 1, 32, 32, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1};
  size_t nx = 4 * 64 * 32 * 32, nw = 64 * 64 * 9;
  float *x = calloc(nx, sizeof(float)), *w = calloc(nw, sizeof(float)), *y = calloc(nx, sizeof(float));
  aotc_kernels_state *s = aotc_kernels_state_create();
  if (!x || !w || !y || !s) return fprintf(stderr, "out of memory\n"), 1;
  for (size_t i = 0; i < nx; ++i) x[i] = (float)(i % 7) - 3.0f;
  for (size_t i = 0; i < nw; ++i) w[i] = (float)(i % 5) - 2.0f;
  for (int rep = 0; rep < 3; ++rep) {
    int rc = aotc_conv(s, &d, x, w, y, NULL);
    if (rc) {
      fprintf(stderr, "aotc_conv failed (%d): %s\n", rc, aotc_kernels_state_error(s));
      return 1;
    }
  }
  int after = threads();
  aotc_kernels_state_destroy(s);
  free(x), free(w), free(y);

  printf("OMP_NUM_THREADS pool: %d threads (region saw %d); GOMP_parallel from %s; process threads before "
         "the oneDNN convolution %d, after %d\n",
         want, seen, lib, before, after);
  int ok = 1;
  if (!strstr(lib, "libomp")) {
    printf("FAIL: GOMP_parallel resolves to %s, not LLVM's libomp\n", lib);
    ok = 0;
  }
  if (after != before) {
    printf("FAIL: the oneDNN convolution started %d thread(s): a second OpenMP runtime\n", after - before);
    ok = 0;
  }
  if (omp_get_max_threads() != want || seen != want) {
    printf("FAIL: omp_get_max_threads() %d, region %d, expected %d\n", omp_get_max_threads(), seen, want);
    ok = 0;
  }
  if (ok) printf("one OpenMP runtime: libomp serves oneDNN\n");
  return ok ? 0 : 1;
}
