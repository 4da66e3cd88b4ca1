/*===- abi.h - The C ABI between aotc-generated objects and callers -*- C -*-===*
 *
 * An object emitted by `aotc IN -o OUT.o` exports, for a program named <name>:
 *
 *   int <name>_forward(const void *const *in, void *const *out,
 *                      void *saved, void *scratch);
 *   int <name>_backward(const void *const *in, const void *saved,
 *                       const void *const *tangents, void *const *grads,
 *                       void *scratch);
 *   extern const aotc_program <name>_program;
 *
 * Buffers are dense, row-major, 64-byte aligned and owned by the caller:
 *  - in[i]       : forward inputs, in placeholder order (parameters and user inputs);
 *                  the backward receives the same inputs again;
 *  - out[i]      : forward outputs (user outputs, then mutated inputs' new values);
 *  - saved       : saved_bytes bytes; written by forward, read by backward
 *                  (intermediates only: inputs are never copied into it);
 *  - scratch     : scratch_bytes bytes; contents need not survive between calls;
 *  - tangents[i] : cotangent of out[i] (same shape/dtype); NULL for outputs that
 *                  are not differentiable (integer/bool dtype);
 *  - grads[j]    : gradient of input grad_input_index[j]; overwritten, never accumulated.
 * Return value: 0 on success; k > 0 means error k: errors[k-1] names the node
 * and *error_value holds the offending value (e.g. an out-of-range index).
 * Entry points are reentrant for distinct saved/scratch buffers.
 *===----------------------------------------------------------------------===*/
#ifndef AOTC_ABI_H
#define AOTC_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AOTC_ABI_VERSION 1
/** Alignment, in bytes, of every buffer passed to an entry point. */
#define AOTC_ALIGNMENT 64

/** Element types. AOTC_I32 and AOTC_U8 are index dtypes: graph inputs read by gather,
 *  index_select, embedding or scatter_add (and outputs that are views of such an input);
 *  no computed result, saved tensor or gradient uses them. */
typedef enum aotc_dtype {
  AOTC_F32 = 0,
  AOTC_F64 = 1,
  AOTC_I64 = 2,
  AOTC_BOOL = 3,
  AOTC_I32 = 4,
  AOTC_U8 = 5
} aotc_dtype;

typedef enum aotc_role {
  AOTC_ROLE_PARAMETER = 0,  /**< A module parameter; `name` is its FQN. */
  AOTC_ROLE_BUFFER = 1,     /**< A module buffer; `name` is its FQN. */
  AOTC_ROLE_USER_INPUT = 2, /**< A user input (placeholder name). */
  AOTC_ROLE_OUTPUT = 3,     /**< A forward output. */
  AOTC_ROLE_GRAD = 4        /**< A gradient; `name` is the input's name. */
} aotc_role;

typedef struct aotc_tensor_desc {
  const char *name;     /**< FQN for parameters/buffers, else the graph name. */
  int32_t dtype;        /**< aotc_dtype */
  int32_t role;         /**< aotc_role */
  int32_t rank;
  int32_t requires_grad;/**< inputs only: 1 when a gradient is produced. */
  const int64_t *shape; /**< rank entries (NULL when rank == 0). */
  int64_t numel;
  int64_t bytes;        /**< numel * itemsize */
} aotc_tensor_desc;

typedef int (*aotc_forward_fn)(const void *const *in, void *const *out, void *saved, void *scratch);
typedef int (*aotc_backward_fn)(const void *const *in, const void *saved,
                                const void *const *tangents, void *const *grads, void *scratch);

typedef struct aotc_program {
  uint32_t abi_version;          /**< AOTC_ABI_VERSION */
  const char *name;              /**< <name> */
  int32_t num_inputs;
  const aotc_tensor_desc *inputs;
  int32_t num_outputs;
  const aotc_tensor_desc *outputs;
  int32_t num_grads;
  const aotc_tensor_desc *grads;
  const int32_t *grad_input_index; /**< num_grads entries: index into inputs. */
  int64_t saved_bytes;           /**< Size of the saved area, bytes. */
  int64_t scratch_bytes;         /**< Size of the scratch arena, bytes (max of forward and backward). */
  aotc_forward_fn forward;
  aotc_backward_fn backward;
  int32_t num_errors;
  const char *const *errors;     /**< Messages for return codes 1..num_errors. */
  int64_t *error_value;          /**< Offending value of the last error (object-global). */
} aotc_program;

#ifdef __cplusplus
}
#endif

#endif /* AOTC_ABI_H */
