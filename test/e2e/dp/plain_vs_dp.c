/*===- plain_vs_dp.c - The data-parallel object without a communicator = the plain one -===*
 *
 * two_weights.fx.txt (y = x @ w1 + x @ w2: the backward computes one gradient and copies it
 * into the other, reading a finished gradient after it is written) compiled twice with
 * --optimizer=sgd:lr=0.001,momentum=0.9 --grad-accumulation: `plain` and `dp`
 * (--data-parallel=0.01, one bucket per gradient). Three rounds of a micro-batch
 * (AOTC_STEP_ACCUMULATE) then a step, in one process without a communicator: the parameters
 * must have the same bits. A data-parallel plan that started grad_w1's bucket (and added its
 * accumulator into it) before the copy made grad_w2 = g + acc_w1 + acc_w2 (found in review).
 * Exit 0 when equal, 1 otherwise.
 *===----------------------------------------------------------------------===*/
#include "aotc/abi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const aotc_program plain_program, dp_program;

static void *zeroed(size_t n) {
  size_t m = (n + 63) / 64 * 64 + 64;
  void *p = aligned_alloc(64, m);
  if (!p) abort();
  memset(p, 0, m);
  return p;
}

/* Trains `p` from fixed weights; returns w1 and w2 (4096 floats each) in out. */
static int train(const aotc_program *p, float *out) {
  aotc_context *ctx = p->context_create();
  float *w1 = zeroed(16384), *w2 = zeroed(16384), *x = zeroed(2048), *loss = zeroed(4);
  for (int i = 0; i < 4096; ++i) {
    w1[i] = (float)((i * 13) % 7) * 0.01f;
    w2[i] = (float)((i * 5) % 11) * 0.01f;
  }
  const void *in[3] = {w1, w2, x};
  void *outs[1] = {loss};
  void *saved = zeroed((size_t)p->saved_bytes), *state = zeroed((size_t)p->train->state_bytes);
  void *scratch = zeroed((size_t)p->train->scratch_bytes);
  double hyper[16];
  for (int h = 0; h < p->train->num_hyper; ++h) hyper[h] = p->train->hyper[h].value;
  for (int round = 0; round < 3; ++round)
    for (int m = 0; m < 2; ++m) {
      for (int i = 0; i < 512; ++i) x[i] = (float)((i * 37 + 11 * m + 5 * round) % 23) * 0.05f - 0.5f;
      int rc = p->train->train_step(ctx, (void *const *)in, outs, saved, state, hyper, scratch,
                                    m == 0 ? AOTC_STEP_ACCUMULATE : 0u);
      if (rc != 0) {
        fprintf(stderr, "%s: train_step returned %d\n", p->name, rc);
        return 1;
      }
    }
  memcpy(out, w1, 16384);
  memcpy(out + 4096, w2, 16384);
  p->context_destroy(ctx);
  return 0;
}

int main(void) {
  static float a[8192], b[8192];
  if (train(&plain_program, a) || train(&dp_program, b)) return 1;
  int differ = 0;
  for (int i = 0; i < 8192; ++i) differ += memcmp(&a[i], &b[i], 4) != 0;
  printf("plain vs data-parallel (no communicator), 3 x (micro-batch + step): %d of 8192 parameters differ\n", differ);
  return differ ? 1 : 0;
}
