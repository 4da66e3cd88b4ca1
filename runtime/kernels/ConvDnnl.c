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
 *  - attributes: scratchpad_mode_user, so the primitive's temporary memory is the state's
 *    scratchpad (one buffer, grown to the largest primitive's need, never per call).
 * The primitive and its memory objects (made without a buffer; each call sets the caller's
 * pointers) are kept in the state, keyed by the whole descriptor: a call with a descriptor
 * seen before creates nothing. Every oneDNN failure returns AOTC_KERNELS_ERROR_DNNL with a
 * message naming the call and oneDNN's status; nothing here aborts.
 *===----------------------------------------------------------------------===*/
#include "ConvInternal.h"

#include "aotc/abi.h"

#include <dnnl.h>
#include <dnnl_debug.h>
#include <stdlib.h>
#include <string.h>

typedef struct conv_entry {
  aotc_conv_desc key;
  dnnl_primitive_desc_t fwd_pd; /* forward_training: the primitive's own or the backward's hint */
  dnnl_primitive_desc_t pd;     /* the role's (fwd_pd itself for the forward) */
  dnnl_primitive_t prim;
  dnnl_memory_t mem[4];         /* a, b, c, scratchpad (NULL when it needs none) */
  int args[3];                  /* DNNL_ARG_* of a, b, c */
  size_t scratch_bytes;
} conv_entry;

struct aotc_kernels_state {
  dnnl_engine_t engine; /* made at the first f32 convolution */
  dnnl_stream_t stream;
  conv_entry *entries;
  int64_t count, capacity;
  void *scratchpad;
  size_t scratchpad_bytes;
  int64_t primitives, hits;
  int has_error;
  char message[AOTC_KERNELS_MESSAGE_BYTES];
};

aotc_kernels_state *aotc_kernels_state_create(void) {
  return (aotc_kernels_state *)calloc(1, sizeof(aotc_kernels_state));
}

static void destroyEntry(conv_entry *e) {
  for (int i = 0; i < 4; ++i)
    if (e->mem[i]) dnnl_memory_destroy(e->mem[i]);
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
  if (s->stream) dnnl_stream_destroy(s->stream);
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
  if (s->stream) return AOTC_KERNELS_OK;
  if (!s->engine) {
    if (dnnl_engine_get_count(dnnl_cpu) < 1) {
      aotc_kernels_format(s->message, sizeof s->message, "oneDNN: no CPU engine");
      return AOTC_KERNELS_ERROR_DNNL;
    }
    DNNL(dnnl_engine_create(&s->engine, dnnl_cpu, 0), "dnnl_engine_create(cpu)");
  }
  DNNL(dnnl_stream_create(&s->stream, s->engine, dnnl_stream_default_flags), "dnnl_stream_create");
  return AOTC_KERNELS_OK;
}

/* Memory object for `arg` of e->pd without a buffer, after checking that the primitive uses
 * the plain layout `want` (so the caller's dense tensors are what it reads or writes). */
static int makeMemory(aotc_kernels_state *s, conv_entry *e, int slot, dnnl_query_t q, const dnnl_memory_desc_t *want,
                      const char *what) {
  const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(e->pd, q, 0);
  if (!md || !dnnl_memory_desc_equal(md, want)) {
    aotc_kernels_format(s->message, sizeof s->message, "oneDNN: the primitive's %s is not the plain layout", what);
    return AOTC_KERNELS_ERROR_DNNL;
  }
  DNNL(dnnl_memory_create(&e->mem[slot], md, s->engine, DNNL_MEMORY_NONE), "dnnl_memory_create");
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
    if (e->scratch_bytes > 0 && (st = dnnl_memory_create(&e->mem[3], smd, s->engine, DNNL_MEMORY_NONE)) != dnnl_success) {
      rc = dnnlFailed(s, "dnnl_memory_create(scratchpad)", st);
      goto done;
    }
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

static int ensureScratchpad(aotc_kernels_state *s, size_t bytes) {
  if (bytes <= s->scratchpad_bytes) return AOTC_KERNELS_OK;
  size_t size = (bytes + 4095) / 4096 * 4096;
  void *p = NULL;
  if (posix_memalign(&p, 64, size) != 0 || !p) {
    aotc_kernels_format(s->message, sizeof s->message, "out of memory (a scratchpad of %zu bytes)", size);
    return AOTC_KERNELS_ERROR_NO_MEMORY;
  }
  free(s->scratchpad);
  s->scratchpad = p, s->scratchpad_bytes = size;
  return AOTC_KERNELS_OK;
}

int aotc_conv_dnnl(aotc_kernels_state *s, const aotc_conv_desc *d, const void *a, const void *b, void *c) {
  if (!s) return AOTC_KERNELS_ERROR_NO_STATE;
  if (d->n == 0) { /* nothing to read: dw = 0; x and y have no elements */
    if (d->role == AOTC_CONV_WEIGHT_GRAD) memset(c, 0, sizeof(float) * (size_t)(d->k * (d->c / d->groups) * d->kh * d->kw));
    return AOTC_KERNELS_OK;
  }
  int rc = ensureEngine(s);
  conv_entry *e = NULL;
  if (rc || (rc = findEntry(s, d, &e)) || (rc = ensureScratchpad(s, e->scratch_bytes))) return rc;
  void *ptr[4] = {(void *)a, (void *)b, c, s->scratchpad};
  dnnl_exec_arg_t args[4];
  int nargs = 0;
  for (int i = 0; i < 4; ++i) {
    if (!e->mem[i]) continue;
    DNNL(dnnl_memory_set_data_handle(e->mem[i], ptr[i]), "dnnl_memory_set_data_handle");
    args[nargs].arg = i < 3 ? e->args[i] : DNNL_ARG_SCRATCHPAD;
    args[nargs].memory = e->mem[i];
    ++nargs;
  }
  DNNL(dnnl_primitive_execute(e->prim, s->stream, nargs, args), "dnnl_primitive_execute(convolution)");
  DNNL(dnnl_stream_wait(s->stream), "dnnl_stream_wait");
  return AOTC_KERNELS_OK;
}
