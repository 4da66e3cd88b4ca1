/*===- alloc_counter.c - LD_PRELOAD interposer counting heap and mmap calls -===*
 *
 * Loaded with LD_PRELOAD in front of a test driver (optim_driver noalloc): every call of
 * malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign, valloc, pvalloc, mmap and
 * mmap64 in the whole process (any thread, any library: the runtime, the generated object,
 * OpenBLAS, libomp, oneDNN) increments one counter while counting is on. The driver finds
 * the two control functions with weak references:
 *   void aotc_alloc_count_start(void);   resets the counter and starts counting
 *   long aotc_alloc_count_stop(void);    stops and returns the count
 * The real functions come from dlsym(RTLD_NEXT); dlsym's own calloc during that lookup is
 * served from a small static arena (and never freed). The callers of the first 16 counted
 * calls are kept (return addresses, no allocation) and printed to stderr by
 * aotc_alloc_count_stop() when it returns a non-zero count, named through dladdr;
 *   long aotc_alloc_count_outside(const char *lib);  after stop: how many of the kept callers
 *                                                     are not in a library whose path contains lib
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>

static atomic_long count_;
static atomic_int on_;

void aotc_alloc_count_start(void) {
  atomic_store(&count_, 0);
  atomic_store(&on_, 1);
}

enum { kCallers = 16 };
static void *callers_[kCallers];
static const char *what_[kCallers];

long aotc_alloc_count_stop(void) {
  atomic_store(&on_, 0);
  long n = atomic_load(&count_);
  for (long k = 0; k < n && k < kCallers; ++k) {
    Dl_info info;
    int ok = dladdr(callers_[k], &info);
    fprintf(stderr, "alloc_counter: %s called from %p %s (%s)\n", what_[k], callers_[k],
            ok && info.dli_sname ? info.dli_sname : "?", ok && info.dli_fname ? info.dli_fname : "?");
  }
  return n;
}

long aotc_alloc_count_outside(const char *lib) {
  long n = atomic_load(&count_), outside = n > kCallers ? n - kCallers : 0;
  for (long k = 0; k < n && k < kCallers; ++k) {
    Dl_info info;
    if (!dladdr(callers_[k], &info) || !info.dli_fname || !strstr(info.dli_fname, lib)) ++outside;
  }
  return outside;
}

#define tick() tickFrom(__func__, __builtin_return_address(0))
static void tickFrom(const char *what, void *caller) {
  if (!atomic_load_explicit(&on_, memory_order_relaxed)) return;
  long k = atomic_fetch_add(&count_, 1);
  if (k < kCallers) callers_[k] = caller, what_[k] = what;
}

static char boot_[4096];
static size_t bootUsed_;
static int resolving_;

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static void *(*real_mmap64)(void *, size_t, int, int, int, off_t);

static void resolve(void) {
  if (real_malloc || resolving_) return;
  resolving_ = 1;
  real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
  real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
  real_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
  real_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
  real_valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
  real_pvalloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "pvalloc");
  real_mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
  real_mmap64 = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap64");
  resolving_ = 0;
}

static int fromBoot(const void *p) { return (const char *)p >= boot_ && (const char *)p < boot_ + sizeof boot_; }

void *malloc(size_t n) {
  resolve();
  tick();
  return real_malloc(n);
}

void *calloc(size_t a, size_t b) {
  if (!real_calloc) {
    resolve();
    if (!real_calloc) { /* dlsym's own allocation while resolving */
      size_t n = (a * b + 15) & ~(size_t)15;
      if (bootUsed_ + n > sizeof boot_) return NULL;
      void *p = boot_ + bootUsed_;
      bootUsed_ += n;
      memset(p, 0, n);
      return p;
    }
  }
  tick();
  return real_calloc(a, b);
}

void *realloc(void *p, size_t n) {
  resolve();
  tick();
  return real_realloc(p, n);
}

void free(void *p) {
  if (!p || fromBoot(p)) return;
  resolve();
  real_free(p);
}

int posix_memalign(void **out, size_t al, size_t n) {
  resolve();
  tick();
  return real_posix_memalign(out, al, n);
}

void *aligned_alloc(size_t al, size_t n) {
  resolve();
  tick();
  return real_aligned_alloc(al, n);
}

void *memalign(size_t al, size_t n) {
  resolve();
  tick();
  return real_memalign(al, n);
}

void *valloc(size_t n) {
  resolve();
  tick();
  return real_valloc(n);
}

void *pvalloc(size_t n) {
  resolve();
  tick();
  return real_pvalloc(n);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  resolve();
  tick();
  return real_mmap(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  resolve();
  tick();
  return real_mmap64 ? real_mmap64(addr, len, prot, flags, fd, off) : real_mmap(addr, len, prot, flags, fd, off);
}
