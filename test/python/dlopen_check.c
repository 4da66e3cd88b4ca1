/* dlopen_check: loads a shared library made from an aotc object and reads its descriptor.
 *
 *   dlopen_check LIB NAME      dlopen(LIB), dlsym(NAME_program), check abi_version, print
 *                              every tensor descriptor, run NAME_forward on all-zero inputs
 *                              and NAME_backward with a cotangent of 1 for 0-d outputs,
 *                              print each 0-d f32 output as "out[k]=%.9g" and per gradient
 *                              "grad[j] sum=%.9g first=%.9g" (sum and first element). Exit 0 on success, 1 otherwise.
 *   dlopen_check LIB --open    only dlopen(LIB) (e.g. a shared library holding the runtime)
 *   dlopen_check --layout      sizeof/offsetof of every struct the Python package mirrors
 *                              (aotc_tensor_desc, aotc_program, aotc_state_desc,
 *                              aotc_hyper_desc, aotc_train) as JSON; test_core.py compares
 *                              its ctypes classes with it
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aotc/abi.h"

static const char *dtypeName(int d) {
  switch (d) {
  case AOTC_F32: return "f32";
  case AOTC_F64: return "f64";
  case AOTC_I64: return "i64";
  case AOTC_BOOL: return "bool";
  }
  return "?";
}

static const char *roleName(int r) {
  static const char *names[] = {"parameter", "buffer", "user_input", "output", "grad"};
  return r >= 0 && r <= 4 ? names[r] : "?";
}

static void printDesc(const char *kind, int i, const aotc_tensor_desc *d) {
  printf("%s[%d] %s %s[", kind, i, d->name, dtypeName(d->dtype));
  for (int k = 0; k < d->rank; ++k)
    printf(k ? ", %lld" : "%lld", (long long)d->shape[k]);
  printf("] %s requires_grad=%d numel=%lld bytes=%lld\n", roleName(d->role), d->requires_grad,
         (long long)d->numel, (long long)d->bytes);
}

static void *zeros(int64_t bytes) {
  size_t n = (size_t)(bytes + AOTC_ALIGNMENT - 1) / AOTC_ALIGNMENT * AOTC_ALIGNMENT;
  void *p = aligned_alloc(AOTC_ALIGNMENT, n ? n : AOTC_ALIGNMENT);
  if (p) memset(p, 0, n ? n : AOTC_ALIGNMENT);
  return p;
}

#define FIELD(T, f) printf("\"%s\": [%zu, %zu]", #f, offsetof(T, f), sizeof(((T *)0)->f))

static int layout(void) {
  printf("{\"aotc_tensor_desc\": {\"sizeof\": %zu, \"fields\": {", sizeof(aotc_tensor_desc));
  FIELD(aotc_tensor_desc, name); printf(", ");
  FIELD(aotc_tensor_desc, dtype); printf(", ");
  FIELD(aotc_tensor_desc, role); printf(", ");
  FIELD(aotc_tensor_desc, rank); printf(", ");
  FIELD(aotc_tensor_desc, requires_grad); printf(", ");
  FIELD(aotc_tensor_desc, shape); printf(", ");
  FIELD(aotc_tensor_desc, numel); printf(", ");
  FIELD(aotc_tensor_desc, bytes); printf(", ");
  FIELD(aotc_tensor_desc, updates_input); printf(", ");
  FIELD(aotc_tensor_desc, reserved);
  printf("}},\n \"aotc_program\": {\"sizeof\": %zu, \"fields\": {", sizeof(aotc_program));
  FIELD(aotc_program, abi_version); printf(", ");
  FIELD(aotc_program, name); printf(", ");
  FIELD(aotc_program, num_inputs); printf(", ");
  FIELD(aotc_program, inputs); printf(", ");
  FIELD(aotc_program, num_outputs); printf(", ");
  FIELD(aotc_program, outputs); printf(", ");
  FIELD(aotc_program, num_grads); printf(", ");
  FIELD(aotc_program, grads); printf(", ");
  FIELD(aotc_program, grad_input_index); printf(", ");
  FIELD(aotc_program, saved_bytes); printf(", ");
  FIELD(aotc_program, scratch_bytes); printf(", ");
  FIELD(aotc_program, forward); printf(", ");
  FIELD(aotc_program, backward); printf(", ");
  FIELD(aotc_program, num_errors); printf(", ");
  FIELD(aotc_program, errors); printf(", ");
  FIELD(aotc_program, error_value_offset); printf(", ");
  FIELD(aotc_program, build_id); printf(", ");
  FIELD(aotc_program, flags); printf(", ");
  FIELD(aotc_program, reserved); printf(", ");
  FIELD(aotc_program, context_create); printf(", ");
  FIELD(aotc_program, context_destroy); printf(", ");
  FIELD(aotc_program, context_error); printf(", ");
  FIELD(aotc_program, train); printf(", ");
  FIELD(aotc_program, eval);
  printf("}},\n \"aotc_state_desc\": {\"sizeof\": %zu, \"fields\": {", sizeof(aotc_state_desc));
  FIELD(aotc_state_desc, name); printf(", ");
  FIELD(aotc_state_desc, dtype); printf(", ");
  FIELD(aotc_state_desc, kind); printf(", ");
  FIELD(aotc_state_desc, rank); printf(", ");
  FIELD(aotc_state_desc, param_input); printf(", ");
  FIELD(aotc_state_desc, shape); printf(", ");
  FIELD(aotc_state_desc, numel); printf(", ");
  FIELD(aotc_state_desc, bytes); printf(", ");
  FIELD(aotc_state_desc, offset); printf(", ");
  FIELD(aotc_state_desc, key);
  printf("}},\n \"aotc_hyper_desc\": {\"sizeof\": %zu, \"fields\": {", sizeof(aotc_hyper_desc));
  FIELD(aotc_hyper_desc, name); printf(", ");
  FIELD(aotc_hyper_desc, value); printf(", ");
  FIELD(aotc_hyper_desc, min); printf(", ");
  FIELD(aotc_hyper_desc, max); printf(", ");
  FIELD(aotc_hyper_desc, max_open); printf(", ");
  FIELD(aotc_hyper_desc, reserved);
  printf("}},\n \"aotc_train\": {\"sizeof\": %zu, \"fields\": {", sizeof(aotc_train));
  FIELD(aotc_train, optimizer); printf(", ");
  FIELD(aotc_train, config); printf(", ");
  FIELD(aotc_train, clip_grad_norm); printf(", ");
  FIELD(aotc_train, skip_nonfinite); printf(", ");
  FIELD(aotc_train, grad_accumulation); printf(", ");
  FIELD(aotc_train, reserved); printf(", ");
  FIELD(aotc_train, num_params); printf(", ");
  FIELD(aotc_train, param_inputs); printf(", ");
  FIELD(aotc_train, num_state); printf(", ");
  FIELD(aotc_train, num_hyper); printf(", ");
  FIELD(aotc_train, state); printf(", ");
  FIELD(aotc_train, hyper); printf(", ");
  FIELD(aotc_train, state_bytes); printf(", ");
  FIELD(aotc_train, scratch_bytes); printf(", ");
  FIELD(aotc_train, train_step);
  printf("}},\n \"AOTC_ABI_VERSION\": %d, \"AOTC_ALIGNMENT\": %d}\n", AOTC_ABI_VERSION,
         AOTC_ALIGNMENT);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--layout") == 0)
    return layout();
  if (argc != 3) {
    fprintf(stderr, "usage: dlopen_check LIB NAME | LIB --open | --layout\n");
    return 1;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "error: dlopen: %s\n", dlerror());
    return 1;
  }
  if (strcmp(argv[2], "--open") == 0) {
    printf("loaded %s\n", argv[1]);
    return 0;
  }
  char sym[256];
  snprintf(sym, sizeof sym, "%s_program", argv[2]);
  const aotc_program *p = (const aotc_program *)dlsym(lib, sym);
  if (!p) {
    fprintf(stderr, "error: dlsym(%s): %s\n", sym, dlerror());
    return 1;
  }
  if (p->abi_version != AOTC_ABI_VERSION) {
    fprintf(stderr, "error: %s has ABI version %u, expected %d\n", sym, p->abi_version,
            AOTC_ABI_VERSION);
    return 1;
  }
  printf("program %s abi_version=%u inputs=%d outputs=%d grads=%d saved_bytes=%lld "
         "scratch_bytes=%lld errors=%d\n",
         p->name, p->abi_version, p->num_inputs, p->num_outputs, p->num_grads,
         (long long)p->saved_bytes, (long long)p->scratch_bytes, p->num_errors);
  for (int i = 0; i < p->num_inputs; ++i) printDesc("in", i, &p->inputs[i]);
  for (int i = 0; i < p->num_outputs; ++i) printDesc("out", i, &p->outputs[i]);
  for (int j = 0; j < p->num_grads; ++j) {
    printDesc("grad", j, &p->grads[j]);
    printf("grad[%d] of input %d\n", j, p->grad_input_index[j]);
  }
  /* The entry points found through dlsym are the descriptor's. */
  snprintf(sym, sizeof sym, "%s_forward", argv[2]);
  void *fwd = dlsym(lib, sym);
  snprintf(sym, sizeof sym, "%s_backward", argv[2]);
  void *bwd = dlsym(lib, sym);
  snprintf(sym, sizeof sym, "%s_context_create", argv[2]);
  void *create = dlsym(lib, sym);
  snprintf(sym, sizeof sym, "%s_context_destroy", argv[2]);
  void *destroy = dlsym(lib, sym);
  if (fwd != (void *)p->forward || bwd != (void *)p->backward || create != (void *)p->context_create ||
      destroy != (void *)p->context_destroy) {
    fprintf(stderr, "error: descriptor entry points differ from the exported symbols\n");
    return 1;
  }
  aotc_context *ctx = p->context_create();
  if (!ctx) {
    fprintf(stderr, "error: %s_context_create returned NULL\n", argv[2]);
    return 1;
  }
  if (p->forward(NULL, NULL, NULL, NULL, NULL) != AOTC_ERROR_CONTEXT) {
    fprintf(stderr, "error: forward accepted a NULL context\n");
    return 1;
  }

  const void **in = calloc((size_t)p->num_inputs + 1, sizeof(void *));
  void **out = calloc((size_t)p->num_outputs + 1, sizeof(void *));
  const void **tan = calloc((size_t)p->num_outputs + 1, sizeof(void *));
  void **grads = calloc((size_t)p->num_grads + 1, sizeof(void *));
  void *saved = zeros(p->saved_bytes), *scratch = zeros(p->scratch_bytes);
  for (int i = 0; i < p->num_inputs; ++i) in[i] = zeros(p->inputs[i].bytes);
  for (int i = 0; i < p->num_outputs; ++i) {
    const aotc_tensor_desc *d = &p->outputs[i];
    out[i] = zeros(d->bytes);
    if (d->dtype == AOTC_F32 || d->dtype == AOTC_F64) {
      void *t = zeros(d->bytes);
      if (d->rank == 0 && d->dtype == AOTC_F32) *(float *)t = 1.0f;
      if (d->rank == 0 && d->dtype == AOTC_F64) *(double *)t = 1.0;
      tan[i] = t;
    }
  }
  for (int j = 0; j < p->num_grads; ++j) grads[j] = zeros(p->grads[j].bytes);
  int rc = p->forward(ctx, in, out, saved, scratch);
  if (rc == 0) rc = p->backward(ctx, in, saved, tan, grads, scratch);
  if (rc != 0) {
    fprintf(stderr, "error: code %d: %s (value %lld)\n", rc,
            rc > 0 && rc <= p->num_errors ? p->errors[rc - 1] : "?",
            p->error_value_offset >= 0 ? (long long)*(const int64_t *)((const char *)scratch + p->error_value_offset) : 0LL);
    return 1;
  }
  for (int i = 0; i < p->num_outputs; ++i)
    if (p->outputs[i].rank == 0 && p->outputs[i].dtype == AOTC_F32)
      printf("out[%d]=%.9g\n", i, *(const float *)out[i]);
  for (int j = 0; j < p->num_grads; ++j) {
    double s = 0;
    for (int64_t k = 0; k < p->grads[j].numel; ++k)
      s += p->grads[j].dtype == AOTC_F32 ? ((const float *)grads[j])[k]
                                         : ((const double *)grads[j])[k];
    double first = p->grads[j].numel == 0 ? 0
                   : p->grads[j].dtype == AOTC_F32 ? ((const float *)grads[j])[0]
                                                   : ((const double *)grads[j])[0];
    printf("grad[%d] sum=%.9g first=%.9g\n", j, s, first);
  }
  /* Everything is freed: the address suite checks leaks in every driver. */
  p->context_destroy(ctx);
  for (int i = 0; i < p->num_inputs; ++i) free((void *)in[i]);
  for (int i = 0; i < p->num_outputs; ++i) {
    free(out[i]);
    free((void *)tan[i]);
  }
  for (int j = 0; j < p->num_grads; ++j) free(grads[j]);
  free(in);
  free(out);
  free(tan);
  free(grads);
  free(saved);
  free(scratch);
  dlclose(lib);
  return 0;
}
