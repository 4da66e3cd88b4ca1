/*===- ConvDnnl.c - f32 convolutions through oneDNN, and the library state -===*
 *
 * oneDNN 2.6's C API (dnnl.h; Debian libdnnl-dev). For one aotc_conv_desc:
 *  - memory descriptors with plain layouts: src/diff_src nchw [n, c, h, w], dst/diff_dst nchw
 *    [n, k, oh, ow], weights oihw [k, c/g, kh, kw] or, for groups > 1, goihw
 *    [g, k/g, c/g, kh, kw] (the same bytes);
 *  - oneDNN's dilation is ours minus 1; padding_r = padding_l = our padding (oneDNN checks
 *    (h + pl + pr - ((kh-1)(dil_oneDNN+1)+1)) / stride + 1 == oh with floor division, which the
 *    same right padding satisfies also when the last window does not reach the border);
 *  - a forward_training primitive descriptor (the forward's, and the hint of the backward
 *    ones), then the role's: backward_data or backward_weights, created with the hint;
 *  - attributes: scratchpad_mode_user, so the primitive's temporary memory is a slice of the
 *    state's scratchpad (one buffer of one slice per slot, grown, never per call).
 * Threads (docs/abi.md "Threads and bit-identical results"): oneDNN never threads itself here.
 * A call splits the batch into fixed chunks, chosen from the descriptor only (convChunks); each
 * chunk is one execution of a primitive made for one thread (omp_get_max_threads() is 1 while
 * it is created) and the chunks run in a `parallel for` on the caller's libomp team, where
 * oneDNN sees omp_in_parallel() and runs inline. A weight gradient sums the chunks' partial
 * gradients in chunk order. So the bits depend on the descriptor and the ISA, never on the
 * thread count, and no oneDNN parallel region (whose nested-barrier code stalls under libomp's
 * GOMP emulation: 8 ms for a 0.05 ms weight gradient at 2 threads) ever runs.
 * The primitive is kept in the state, keyed by the chunk's descriptor, with one set of memory
 * objects (made without a buffer; each call sets the caller's pointers) per slot; a running
 * chunk holds a slot (memory objects, stream, scratchpad slice). A call with a descriptor seen
 * before creates nothing.
 * Every oneDNN failure returns AOTC_KERNELS_ERROR_DNNL with a message naming the call and
 * oneDNN's status; nothing here aborts.
 *===----------------------------------------------------------------------===*/
#define _GNU_SOURCE /* dlvsym */
#include "ConvInternal.h"

#include "aotc/abi.h"

#include <dnnl.h>
#include <dnnl_debug.h>
#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct conv_entry {
  aotc_conv_desc key;
  dnnl_primitive_desc_t fwd_pd; /* forward_training: the primitive's own or the backward's hint */
  dnnl_primitive_desc_t pd;     /* the role's (fwd_pd itself for the forward) */
  dnnl_primitive_t prim;
  const dnnl_memory_desc_t *md[4]; /* a, b, c, scratchpad (NULL when it needs none): the pd's */
  dnnl_memory_t (*mem)[4];      /* per thread: memory objects of md[], made without a buffer */
  int64_t threads;              /* rows of mem */
  int args[3];                  /* DNNL_ARG_* of a, b, c */
  size_t scratch_bytes;
} conv_entry;

struct aotc_kernels_state {
  dnnl_engine_t engine; /* made at the first f32 convolution */
  dnnl_stream_t *streams; /* one per slot (a chunk in flight) */
  int *busy;              /* per slot: taken by a running chunk (atomic) */
  int64_t threads;        /* slots */
  conv_entry *entries;
  int64_t count, capacity;
  void *scratchpad;       /* `threads` slices of scratch_slice bytes */
  size_t scratchpad_bytes, scratch_slice;
  float *partials;        /* weight gradients of chunks 1.. (chunk 0 writes the result) */
  size_t partials_bytes;
  int64_t primitives, hits;
  int has_error;
  char message[AOTC_KERNELS_MESSAGE_BYTES];
};

aotc_kernels_state *aotc_kernels_state_create(void) {
  return (aotc_kernels_state *)calloc(1, sizeof(aotc_kernels_state));
}

static void destroyEntry(conv_entry *e) {
  for (int64_t t = 0; t < e->threads; ++t)
    for (int i = 0; i < 4; ++i)
      if (e->mem[t][i]) dnnl_memory_destroy(e->mem[t][i]);
  free(e->mem);
  if (e->prim) dnnl_primitive_destroy(e->prim);
  if (e->pd && e->pd != e->fwd_pd) dnnl_primitive_desc_destroy(e->pd);
  if (e->fwd_pd) dnnl_primitive_desc_destroy(e->fwd_pd);
  memset(e, 0, sizeof *e);
}

void aotc_kernels_state_destroy(aotc_kernels_state *s) {
  if (!s) return;
  for (int64_t i = 0; i < s->count; ++i) destroyEntry(&s->entries[i]);
  free(s->entries);
  free(s->scratchpad);
  free(s->partials);
  for (int64_t t = 0; t < s->threads; ++t)
    if (s->streams[t]) dnnl_stream_destroy(s->streams[t]);
  free(s->streams);
  free(s->busy);
  if (s->engine) dnnl_engine_destroy(s->engine);
  free(s);
}

const char *aotc_kernels_state_error(const aotc_kernels_state *s) {
  return s && s->has_error ? s->message : NULL;
}

void aotc_kernels_state_stats(const aotc_kernels_state *s, aotc_kernels_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (!s) return;
  out->primitives = s->primitives;
  out->cache_hits = s->hits;
  out->scratchpad_bytes = (int64_t)s->scratchpad_bytes;
}

char *aotc_kernels_state_message(aotc_kernels_state *s) { return s ? s->message : NULL; }

static const char *roleName(int32_t role) {
  switch (role) {
  case AOTC_CONV_FORWARD: return "forward";
  case AOTC_CONV_INPUT_GRAD: return "input_grad";
  case AOTC_CONV_WEIGHT_GRAD: return "weight_grad";
  }
  return "unknown-role";
}

void aotc_kernels_state_failed(aotc_kernels_state *s, const aotc_conv_desc *d, int rc) {
  if (!s || rc == AOTC_KERNELS_OK) return;
  char why[AOTC_KERNELS_MESSAGE_BYTES];
  memcpy(why, s->message, sizeof why);
  why[sizeof why - 1] = 0;
  if (d)
    aotc_kernels_format(s->message, sizeof s->message,
                        "aotc_conv %s %s n=%lld c=%lld k=%lld groups=%lld %lldx%lld -> %lldx%lld kernel %lldx%lld "
                        "stride %lldx%lld padding %lldx%lld dilation %lldx%lld: %s",
                        d->dtype == AOTC_F64 ? "f64" : d->dtype == AOTC_F32 ? "f32" : "?", roleName(d->role),
                        (long long)d->n, (long long)d->c, (long long)d->k, (long long)d->groups, (long long)d->h,
                        (long long)d->w, (long long)d->oh, (long long)d->ow, (long long)d->kh, (long long)d->kw,
                        (long long)d->stride_h, (long long)d->stride_w, (long long)d->pad_h, (long long)d->pad_w,
                        (long long)d->dil_h, (long long)d->dil_w, why);
  else
    aotc_kernels_format(s->message, sizeof s->message, "aotc_conv: %s", why);
  s->has_error = 1;
}

/* Formats oneDNN's failure of `what` into the state's message. */
static int dnnlFailed(aotc_kernels_state *s, const char *what, dnnl_status_t st) {
  aotc_kernels_format(s->message, sizeof s->message, "oneDNN: %s returned %s", what, dnnl_status2str(st));
  return AOTC_KERNELS_ERROR_DNNL;
}
#define DNNL(call, what)                                                                           \
  do {                                                                                             \
    dnnl_status_t st_ = (call);                                                                    \
    if (st_ != dnnl_success) return dnnlFailed(s, what, st_);                                      \
  } while (0)

static int ensureEngine(aotc_kernels_state *s) {
  if (s->engine) return AOTC_KERNELS_OK;
  if (dnnl_engine_get_count(dnnl_cpu) < 1) {
    aotc_kernels_format(s->message, sizeof s->message, "oneDNN: no CPU engine");
    return AOTC_KERNELS_ERROR_DNNL;
  }
  DNNL(dnnl_engine_create(&s->engine, dnnl_cpu, 0), "dnnl_engine_create(cpu)");
  return AOTC_KERNELS_OK;
}

/* The streams of `threads` slots. */
static int ensureStreams(aotc_kernels_state *s, int64_t threads) {
  if (threads <= s->threads) return AOTC_KERNELS_OK;
  dnnl_stream_t *p = (dnnl_stream_t *)realloc(s->streams, (size_t)threads * sizeof *p);
  if (!p) {
    aotc_kernels_format(s->message, sizeof s->message, "out of memory (the streams)");
    return AOTC_KERNELS_ERROR_NO_MEMORY;
  }
  s->streams = p;
  int *b = (int *)realloc(s->busy, (size_t)threads * sizeof *b);
  if (!b) {
    aotc_kernels_format(s->message, sizeof s->message, "out of memory (the streams)");
    return AOTC_KERNELS_ERROR_NO_MEMORY;
  }
  s->busy = b;
  for (; s->threads < threads; ++s->threads) {
    s->busy[s->threads] = 0;
    s->streams[s->threads] = NULL;
    DNNL(dnnl_stream_create(&s->streams[s->threads], s->engine, dnnl_stream_default_flags), "dnnl_stream_create");
  }
  return AOTC_KERNELS_OK;
}

/* Memory objects of `e` for `threads` slots. */
static int ensureEntryThreads(aotc_kernels_state *s, conv_entry *e, int64_t threads) {
  if (threads <= e->threads) return AOTC_KERNELS_OK;
  dnnl_memory_t(*p)[4] = realloc(e->mem, (size_t)threads * sizeof *p);
  if (!p) {
    aotc_kernels_format(s->message, sizeof s->message, "out of memory (the memory objects)");
    return AOTC_KERNELS_ERROR_NO_MEMORY;
  }
  e->mem = p;
  for (; e->threads < threads; ++e->threads) {
    memset(e->mem[e->threads], 0, sizeof e->mem[e->threads]);
    for (int i = 0; i < 4; ++i)
      if (e->md[i])
        DNNL(dnnl_memory_create(&e->mem[e->threads][i], e->md[i], s->engine, DNNL_MEMORY_NONE), "dnnl_memory_create");
  }
  return AOTC_KERNELS_OK;
}

/* The memory descriptor of `arg` of e->pd, after checking that the primitive uses the plain
 * layout `want` (so the caller's dense tensors are what it reads or writes). */
static int makeMemory(aotc_kernels_state *s, conv_entry *e, int slot, dnnl_query_t q, const dnnl_memory_desc_t *want,
                      const char *what) {
  const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(e->pd, q, 0);
  if (!md || !dnnl_memory_desc_equal(md, want)) {
    aotc_kernels_format(s->message, sizeof s->message, "oneDNN: the primitive's %s is not the plain layout", what);
    return AOTC_KERNELS_ERROR_DNNL;
  }
  e->md[slot] = md;
  return AOTC_KERNELS_OK;
}

static int createEntry(aotc_kernels_state *s, const aotc_conv_desc *d, conv_entry *e) {
  const int64_t G = d->groups;
  dnnl_memory_desc_t x, w, y;
  dnnl_dims_t xd = {d->n, d->c, d->h, d->w}, yd = {d->n, d->k, d->oh, d->ow};
  dnnl_dims_t wd1 = {d->k, d->c / G, d->kh, d->kw}, wdg = {G, d->k / G, d->c / G, d->kh, d->kw};
  DNNL(dnnl_memory_desc_init_by_tag(&x, 4, xd, dnnl_f32, dnnl_nchw), "dnnl_memory_desc_init_by_tag(src)");
  DNNL(dnnl_memory_desc_init_by_tag(&y, 4, yd, dnnl_f32, dnnl_nchw), "dnnl_memory_desc_init_by_tag(dst)");
  if (G == 1)
    DNNL(dnnl_memory_desc_init_by_tag(&w, 4, wd1, dnnl_f32, dnnl_oihw), "dnnl_memory_desc_init_by_tag(weights)");
  else
    DNNL(dnnl_memory_desc_init_by_tag(&w, 5, wdg, dnnl_f32, dnnl_goihw), "dnnl_memory_desc_init_by_tag(weights)");
  dnnl_dims_t strides = {d->stride_h, d->stride_w}, dil = {d->dil_h - 1, d->dil_w - 1};
  dnnl_dims_t pad = {d->pad_h, d->pad_w};

  dnnl_primitive_attr_t attr = NULL;
  DNNL(dnnl_primitive_attr_create(&attr), "dnnl_primitive_attr_create");
  dnnl_status_t st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  int rc = AOTC_KERNELS_OK;
  dnnl_convolution_desc_t fd, bd;
  if (st != dnnl_success) {
    rc = dnnlFailed(s, "dnnl_primitive_attr_set_scratchpad_mode(user)", st);
    goto done;
  }
  st = dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &x, &w, NULL,
                                                  &y, strides, dil, pad, pad);
  if (st != dnnl_success) {
    rc = dnnlFailed(s, "dnnl_dilated_convolution_forward_desc_init", st);
    goto done;
  }
  st = dnnl_primitive_desc_create(&e->fwd_pd, &fd, attr, s->engine, NULL);
  if (st != dnnl_success) {
    rc = dnnlFailed(s, "dnnl_primitive_desc_create(convolution forward)", st);
    goto done;
  }
  if (d->role == AOTC_CONV_FORWARD) {
    e->pd = e->fwd_pd;
  } else {
    int data = d->role == AOTC_CONV_INPUT_GRAD;
    st = data ? dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &x, &w, &y, strides,
                                                                 dil, pad, pad)
              : dnnl_dilated_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct, &x, &w, NULL, &y,
                                                                    strides, dil, pad, pad);
    if (st != dnnl_success) {
      rc = dnnlFailed(s, data ? "dnnl_dilated_convolution_backward_data_desc_init"
                              : "dnnl_dilated_convolution_backward_weights_desc_init", st);
      goto done;
    }
    st = dnnl_primitive_desc_create(&e->pd, &bd, attr, s->engine, e->fwd_pd);
    if (st != dnnl_success) {
      e->pd = NULL;
      rc = dnnlFailed(s, data ? "dnnl_primitive_desc_create(convolution backward data)"
                              : "dnnl_primitive_desc_create(convolution backward weights)", st);
      goto done;
    }
  }
  switch (d->role) {
  case AOTC_CONV_FORWARD:
    e->args[0] = DNNL_ARG_SRC, e->args[1] = DNNL_ARG_WEIGHTS, e->args[2] = DNNL_ARG_DST;
    if ((rc = makeMemory(s, e, 0, dnnl_query_src_md, &x, "source")) ||
        (rc = makeMemory(s, e, 1, dnnl_query_weights_md, &w, "weights")) ||
        (rc = makeMemory(s, e, 2, dnnl_query_dst_md, &y, "destination")))
      goto done;
    break;
  case AOTC_CONV_INPUT_GRAD:
    e->args[0] = DNNL_ARG_DIFF_DST, e->args[1] = DNNL_ARG_WEIGHTS, e->args[2] = DNNL_ARG_DIFF_SRC;
    if ((rc = makeMemory(s, e, 0, dnnl_query_diff_dst_md, &y, "diff_dst")) ||
        (rc = makeMemory(s, e, 1, dnnl_query_weights_md, &w, "weights")) ||
        (rc = makeMemory(s, e, 2, dnnl_query_diff_src_md, &x, "diff_src")))
      goto done;
    break;
  default:
    e->args[0] = DNNL_ARG_DIFF_DST, e->args[1] = DNNL_ARG_SRC, e->args[2] = DNNL_ARG_DIFF_WEIGHTS;
    if ((rc = makeMemory(s, e, 0, dnnl_query_diff_dst_md, &y, "diff_dst")) ||
        (rc = makeMemory(s, e, 1, dnnl_query_src_md, &x, "source")) ||
        (rc = makeMemory(s, e, 2, dnnl_query_diff_weights_md, &w, "diff_weights")))
      goto done;
    break;
  }
  {
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(e->pd, dnnl_query_scratchpad_md, 0);
    e->scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (e->scratch_bytes > 0) e->md[3] = smd;
  }
  st = dnnl_primitive_create(&e->prim, e->pd);
  if (st != dnnl_success) {
    e->prim = NULL;
    rc = dnnlFailed(s, "dnnl_primitive_create(convolution)", st);
    goto done;
  }
  e->key = *d;
done:
  dnnl_primitive_attr_destroy(attr);
  if (rc != AOTC_KERNELS_OK) destroyEntry(e);
  return rc;
}

/* The cached entry of `d`, created on first use. */
static int findEntry(aotc_kernels_state *s, const aotc_conv_desc *d, conv_entry **out) {
  for (int64_t i = 0; i < s->count; ++i)
    if (!memcmp(&s->entries[i].key, d, sizeof *d)) {
      ++s->hits;
      *out = &s->entries[i];
      return AOTC_KERNELS_OK;
    }
  if (s->count == s->capacity) {
    int64_t cap = s->capacity ? 2 * s->capacity : 16;
    conv_entry *p = (conv_entry *)realloc(s->entries, (size_t)cap * sizeof *p);
    if (!p) {
      aotc_kernels_format(s->message, sizeof s->message, "out of memory (the primitive cache)");
      return AOTC_KERNELS_ERROR_NO_MEMORY;
    }
    s->entries = p, s->capacity = cap;
  }
  conv_entry *e = &s->entries[s->count];
  memset(e, 0, sizeof *e);
  int rc = createEntry(s, d, e);
  if (rc) return rc;
  ++s->count, ++s->primitives;
  *out = e;
  return AOTC_KERNELS_OK;
}

/* `bytes` of 64-byte aligned memory in *buf (size *have), grown (never per call). */
static int ensureBuffer(aotc_kernels_state *s, void **buf, size_t *have, size_t bytes, const char *what) {
  if (bytes <= *have) return AOTC_KERNELS_OK;
  size_t size = (bytes + 4095) / 4096 * 4096;
  void *p = NULL;
  if (posix_memalign(&p, 64, size) != 0 || !p) {
    aotc_kernels_format(s->message, sizeof s->message, "out of memory (%s of %zu bytes)", what, size);
    return AOTC_KERNELS_ERROR_NO_MEMORY;
  }
  free(*buf);
  *buf = p, *have = size;
  return AOTC_KERNELS_OK;
}

/* Multiply-adds of one batch entry of `d` (any role: the same product). */
static double entryWork(const aotc_conv_desc *d) {
  return (double)d->k * (double)(d->c / d->groups) * (double)(d->kh * d->kw) * (double)(d->oh * d->ow);
}

/* Batch chunks of `d`, from the descriptor only (never the thread count): as many as the
 * batch allows with at least AOTC_CONV_CHUNK_WORK multiply-adds each (one oneDNN call costs
 * a few microseconds), at most 16, a power of two so that 2, 4 or 8 threads share them
 * evenly; a weight gradient also at most 8 and only while the partial gradients of chunks
 * 1.. fit in 32 MiB. Chunk i holds entries [i*n/C, (i+1)*n/C). */
#define AOTC_CONV_CHUNK_WORK 262144.0
static int64_t convChunks(const aotc_conv_desc *d) {
  double total = entryWork(d) * (double)d->n;
  int64_t c = 1, cap = d->role == AOTC_CONV_WEIGHT_GRAD ? 8 : 16;
  double wbytes = 4.0 * (double)d->k * (double)(d->c / d->groups) * (double)(d->kh * d->kw);
  while (2 * c <= d->n && 2 * c <= cap && total / (double)(2 * c) >= AOTC_CONV_CHUNK_WORK &&
         (d->role != AOTC_CONV_WEIGHT_GRAD || (double)(2 * c - 1) * wbytes <= 32.0 * 1024 * 1024))
    c *= 2;
  return c;
}

/* Executes e on slot t's memory objects, stream and scratchpad slice; 0, or the bit of the
 * call that failed (1 set_data_handle, 2 execute, 4 wait). */
static int runChunk(aotc_kernels_state *s, conv_entry *e, int64_t t, const void *a, const void *b, void *c) {
  /* No scratchpad is allocated while every primitive needs none (a null base, no offset). */
  void *scratch = s->scratchpad ? (char *)s->scratchpad + (size_t)t * s->scratch_slice : NULL;
  void *ptr[4] = {(void *)a, (void *)b, c, scratch};
  dnnl_exec_arg_t args[4];
  int nargs = 0;
  for (int i = 0; i < 4; ++i) {
    if (!e->mem[t][i]) continue;
    if (dnnl_memory_set_data_handle(e->mem[t][i], ptr[i]) != dnnl_success) return 1;
    args[nargs].arg = i < 3 ? e->args[i] : DNNL_ARG_SCRATCHPAD;
    args[nargs].memory = e->mem[t][i];
    ++nargs;
  }
  if (dnnl_primitive_execute(e->prim, s->streams[t], nargs, args) != dnnl_success) return 2;
  if (dnnl_stream_wait(s->streams[t]) != dnnl_success) return 4;
  return 0;
}

/* oneDNN's thread count (ConvInternal.h aotc_dnnl_threads_set). */
static int (*dnnlGetThreads)(void);
static void (*dnnlSetThreads)(int);
static void findDnnlOmpOnce(void) {
  void *g = dlvsym(RTLD_DEFAULT, "omp_get_max_threads", "OMP_1.0");
  void *st = dlvsym(RTLD_DEFAULT, "omp_set_num_threads", "OMP_1.0");
  if (g && st && g != (void *)omp_get_max_threads) {
    dnnlGetThreads = (int (*)(void))g;
    dnnlSetThreads = (void (*)(int))st;
  }
}
/* Once per process, whichever thread comes first (a GEMM's blocks call it from every worker
 * of a parallel region at once). */
static void findDnnlOmp(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, findDnnlOmpOnce);
}
aotc_dnnl_threads aotc_dnnl_threads_set(int n) {
  findDnnlOmp();
  aotc_dnnl_threads was = {omp_get_max_threads(), dnnlGetThreads ? dnnlGetThreads() : 0};
  omp_set_num_threads(n);
  if (dnnlSetThreads) dnnlSetThreads(n);
  return was;
}
void aotc_dnnl_threads_restore(aotc_dnnl_threads was) {
  omp_set_num_threads(was.ours);
  if (dnnlSetThreads) dnnlSetThreads(was.theirs);
}

/* The call below with the calling thread's nthreads-var at 1 while oneDNN is reached:
 * oneDNN sizes its primitives and parallel regions by omp_get_max_threads(), at creation and
 * at execution; the chunks' own team is sized explicitly. */
static int convChunked(aotc_kernels_state *s, const aotc_conv_desc *d, const void *a, const void *b, void *c,
                       int64_t threads);

int aotc_conv_dnnl(aotc_kernels_state *s, const aotc_conv_desc *d, const void *a, const void *b, void *c) {
  if (!s) return AOTC_KERNELS_ERROR_NO_STATE;
  aotc_dnnl_threads was = aotc_dnnl_threads_set(1);
  int rc = convChunked(s, d, a, b, c, was.ours < 1 ? 1 : was.ours);
  aotc_dnnl_threads_restore(was);
  return rc;
}

static int convChunked(aotc_kernels_state *s, const aotc_conv_desc *d, const void *a, const void *b, void *c,
                       int64_t threads) {
  const int64_t wElems = d->k * (d->c / d->groups) * d->kh * d->kw;
  if (d->n == 0) { /* nothing to read: dw = 0; x and y have no elements */
    if (d->role == AOTC_CONV_WEIGHT_GRAD) memset(c, 0, sizeof(float) * (size_t)wElems);
    return AOTC_KERNELS_OK;
  }
  const int64_t chunks = convChunks(d);
  /* The chunks' team, and as many slots (stream, memory objects, scratchpad slice): a chunk
   * takes a free slot while it runs (no thread numbers: the slot is free whatever the team). */
  if (threads > chunks) threads = chunks;
  /* The chunks have two sizes at most: n / chunks and one more. */
  conv_entry *small = NULL, *large = NULL;
  aotc_conv_desc cd = *d;
  int rc = ensureEngine(s);
  if (rc || (rc = ensureStreams(s, threads))) return rc;
  int64_t lo = d->n / chunks, hi = lo + (d->n % chunks != 0);
  /* Both entries first, then pointers to them: a second creation can move the cache. */
  cd.n = hi;
  if (hi != lo && ((rc = findEntry(s, &cd, &large)) || (rc = ensureEntryThreads(s, large, threads)))) return rc;
  int64_t largeIndex = large ? large - s->entries : -1;
  cd.n = lo;
  if (lo > 0 && ((rc = findEntry(s, &cd, &small)) || (rc = ensureEntryThreads(s, small, threads)))) return rc;
  if (largeIndex >= 0) large = &s->entries[largeIndex];
  /* One scratchpad slice per slot, as large as any primitive's so far (slices never shrink). */
  size_t slice = s->scratch_slice;
  if (small && small->scratch_bytes > slice) slice = small->scratch_bytes;
  if (large && large->scratch_bytes > slice) slice = large->scratch_bytes;
  slice = (slice + 63) / 64 * 64;
  if ((rc = ensureBuffer(s, &s->scratchpad, &s->scratchpad_bytes, (size_t)threads * slice, "a scratchpad")))
    return rc;
  s->scratch_slice = slice;
  const int wgrad = d->role == AOTC_CONV_WEIGHT_GRAD;
  if (wgrad && chunks > 1 &&
      (rc = ensureBuffer(s, (void **)&s->partials, &s->partials_bytes,
                         sizeof(float) * (size_t)((chunks - 1) * wElems), "partial weight gradients")))
    return rc;
  /* Element strides of a and b per batch entry (the weights have none). */
  const int64_t xs = d->c * d->h * d->w, ys = d->k * d->oh * d->ow;
  const int64_t as = d->role == AOTC_CONV_FORWARD ? xs : ys, bs = d->role == AOTC_CONV_WEIGHT_GRAD ? xs : 0;
  const int64_t cs = d->role == AOTC_CONV_FORWARD ? ys : d->role == AOTC_CONV_INPUT_GRAD ? xs : 0;
  int failed = 0;
  #pragma omp parallel for schedule(static) num_threads(threads) if (chunks > 1) reduction(| : failed)
  for (int64_t i = 0; i < chunks; ++i) {
    int64_t n0 = i * d->n / chunks, n1 = (i + 1) * d->n / chunks;
    if (n1 == n0) continue;
    conv_entry *e = n1 - n0 == lo ? small : large;
    int64_t t = 0;
    while (__atomic_exchange_n(&s->busy[t], 1, __ATOMIC_ACQUIRE)) t = (t + 1) % threads;
    /* This thread's nthreads-var at 1 in both runtimes (aotc_dnnl_threads_set): a worker's is its own. */
    aotc_dnnl_threads saved = aotc_dnnl_threads_set(1);
    float *out = wgrad ? (i == 0 ? (float *)c : s->partials + (i - 1) * wElems) : (float *)c + n0 * cs;
    failed |= runChunk(s, e, t, (const float *)a + n0 * as, (const float *)b + n0 * bs, out);
    aotc_dnnl_threads_restore(saved);
    __atomic_store_n(&s->busy[t], 0, __ATOMIC_RELEASE);
  }
  if (failed) {
    aotc_kernels_format(s->message, sizeof s->message, "oneDNN: executing the convolution failed (%s)",
                        failed & 2 ? "dnnl_primitive_execute" : failed & 1 ? "dnnl_memory_set_data_handle"
                                                                           : "dnnl_stream_wait");
    return AOTC_KERNELS_ERROR_DNNL;
  }
  if (wgrad && chunks > 1) { /* dw = chunk 0 + chunk 1 + ... in chunk order, per element */
    float *dw = (float *)c;
    const float *p = s->partials;
    #pragma omp parallel for schedule(static) num_threads(threads) if (wElems >= 65536)
    for (int64_t j = 0; j < wElems; ++j) {
      float v = dw[j];
      for (int64_t i = 1; i < chunks; ++i) v += p[(i - 1) * wElems + j];
      dw[j] = v;
    }
  }
  return AOTC_KERNELS_OK;
}
