/*===- capi.h - The runtime's stable C API (libaotc_runtime.so) ----*- C -*-===*
 *
 * The functions every binding calls: the Python package (ctypes, docs/python.md) and any
 * other language. They are the C++ classes of runtime.h and trainer.h behind opaque handles
 * (aotc_rt_function is a DifferentiableFunction, aotc_rt_trainer a Trainer): one runtime,
 * whatever the caller's language. Exported by libaotc_runtime.so (only the aotc_rt_* symbols;
 * runtime/exports.map), also in the static libaotc_runtime.a.
 *
 * Programs: `program` is the address of an object's `<name>_program` (abi.h). Every function
 * taking one first checks it (aotc_rt_program_check): NULL, another ABI major version, or a
 * descriptor with negative counts or NULL tables is AOTC_RT_ERROR_ABI.
 *
 * Tensors: an aotc_rt_tensor names a caller-owned buffer and what it holds. The runtime
 * checks, in this order, and reports the first problem naming the tensor ("mlp: input 'x'
 * (input 4) must be f32[64, 784], got f32[32, 784]"): the count of tensors, a NULL data
 * pointer, the dtype, the rank and shape, and 64-byte alignment (AOTC_ALIGNMENT). Nothing is
 * run then. shape may be NULL when rank is 0; data may be NULL when the tensor holds no bytes
 * (numel 0: torch's empty tensors have data_ptr() 0; no entry point touches such a buffer).
 *
 * Errors: every function returns AOTC_RT_OK (0) or an aotc_rt_status. The calling thread's
 * last error (message and, for AOTC_RT_ERROR_PROGRAM, the entry point's code and offending
 * value) is read with aotc_rt_last_error() / aotc_rt_last_error_info(); it is kept until the
 * thread's next failing call. No function throws, aborts or exits on bad input.
 *
 * Threads: a handle serves one thread at a time (it owns one ABI context and one scratch
 * arena); distinct handles may be used concurrently, also of one program.
 *
 * Allocation: aotc_rt_forward / backward / eval and aotc_rt_trainer_step allocate nothing
 * (the handles allocate their context, scratch, default cotangents and pointer tables when
 * created). Checkpoint images are allocated (aotc_rt_free releases them).
 *===----------------------------------------------------------------------===*/
#ifndef AOTC_CAPI_H
#define AOTC_CAPI_H

#include "aotc/abi.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Status codes. */
typedef enum aotc_rt_status {
  AOTC_RT_OK = 0,
  AOTC_RT_ERROR_ARGUMENT = 1, /**< The caller's arguments: counts, NULL, dtype, shape, alignment,
                                   names, hyperparameter ranges, a saved area of the wrong size. */
  AOTC_RT_ERROR_PROGRAM = 2,  /**< An entry point returned non-zero (code and value in the
                                   error info: an index out of range, a library failure). */
  AOTC_RT_ERROR_ABI = 3,      /**< Another ABI major version, an invalid descriptor, or an entry
                                   point the object does not have (no train step, no eval). */
  AOTC_RT_ERROR_IO = 4,       /**< A file could not be read or written, or is not a valid
                                   safetensors file / checkpoint of this program. */
  AOTC_RT_ERROR_STATE = 5,    /**< Not now: saving or loading in the middle of a gradient
                                   accumulation; a trainer's borrowed weights by Tensor. */
  AOTC_RT_ERROR_NOMEM = 6,    /**< Out of memory. */
  AOTC_RT_ERROR_INTERNAL = 7, /**< A bug of the runtime: please report it. */
  AOTC_RT_ERROR_NONFINITE = 8 /**< A train step's loss or gradient norm was NaN or infinite and
                                   the trainer's policy is AOTC_RT_NONFINITE_RAISE. */
} aotc_rt_status;

/** A caller-owned tensor: data of dtype (aotc_dtype) with `rank` dimensions `shape`
 *  (row-major, dense, 64-byte aligned). */
typedef struct aotc_rt_tensor {
  void *data;
  int32_t dtype;
  int32_t rank;
  const int64_t *shape;
} aotc_rt_tensor;

/** The last error of the calling thread (aotc_rt_last_error_info). Strings stay valid until
 *  the thread's next failing call; empty strings where not applicable. */
typedef struct aotc_rt_error_info {
  int32_t status;        /**< aotc_rt_status of the failed call (0: none yet). */
  int32_t entry_code;    /**< PROGRAM: the entry point's return value (abi.h), else 0. */
  int64_t value;         /**< PROGRAM: the offending value (abi.h error_value_offset), else 0. */
  const char *message;   /**< The complete message. */
  const char *entry;     /**< PROGRAM: "forward", "backward", "eval" or "train_step". */
  const char *node_message; /**< PROGRAM: errors[entry_code-1] of the descriptor (or the ABI
                                 constant's meaning for AOTC_ERROR_CONTEXT / _NO_ACCUMULATION). */
  const char *library_message; /**< PROGRAM: the library's text (program.context_error), or "". */
} aotc_rt_error_info;

/** The complete message of the calling thread's last failed call ("" if none). */
const char *aotc_rt_last_error(void);
/** Fills *info with the calling thread's last error; returns its status. */
int aotc_rt_last_error_info(aotc_rt_error_info *info);

/** AOTC_ABI_VERSION of this runtime (abi.h: minor << 16 | major). */
uint32_t aotc_rt_abi_version(void);
/** Zeroes the profile counters of every live profiled context (AOTC_PROFILE, docs/profiling.md):
 *  call it after warm-up steps so that the reports leave them out, while no entry point runs on
 *  any thread (the objects add to the counters unlocked). */
void aotc_rt_profile_reset(void);
/** Checks `program` (see the top of this file). */
int aotc_rt_program_check(const aotc_program *program);
/** The whole descriptor as JSON (abi.h's fields by their names): name, abi_version,
 *  build_id, flags, saved_bytes, scratch_bytes, has_eval, inputs / outputs / grads ({name,
 *  dtype, role, shape, requires_grad, numel, bytes, updates_input}), grad_input_index, errors,
 *  kernels ({graph, name, kind, ops, bytes, flops, dtype, trans, shape: [m, n, k, batch]}: the
 *  kernel table, docs/profiling.md) and train (null, or {optimizer, config, clip_grad_norm, skip_nonfinite, grad_accumulation,
 *  param_inputs, state_bytes, scratch_bytes, state: [{name, dtype, kind, shape, param_input,
 *  offset, bytes, key}], hyper: [{name, value, min, max, max_open}]}). Writes at most `cap`
 *  bytes (NUL included) to buf and the needed size (NUL included) to *needed; buf may be NULL
 *  when cap is 0. AOTC_RT_ERROR_ARGUMENT when cap is too small (*needed says how much). */
int aotc_rt_program_describe(const aotc_program *program, char *buf, size_t cap, size_t *needed);

/*===--- A differentiable function: forward, backward, eval ---------------===*/

typedef struct aotc_rt_function aotc_rt_function;

/** A function over `program` (its ABI context and scratch arena). */
int aotc_rt_function_create(const aotc_program *program, aotc_rt_function **out);
/** Frees it (NULL is ignored). */
void aotc_rt_function_destroy(aotc_rt_function *fn);

/** <name>_forward: in[num_inputs] (program order), out[num_outputs] (written), `saved` a
 *  caller-owned area of saved_bytes bytes (64-byte aligned; NULL when saved_bytes is 0) that
 *  the matching backward reads. */
int aotc_rt_forward(aotc_rt_function *fn, const aotc_rt_tensor *in, int32_t n_in, const aotc_rt_tensor *out,
                    int32_t n_out, void *saved, int64_t saved_bytes);
/** <name>_backward of an earlier forward on the same inputs and saved area. tangents:
 *  n_tangents <= num_outputs entries (NULL when 0); a missing entry or one with data == NULL is
 *  the default cotangent of a differentiable output (1 for a 0-d output, a loss; zeros
 *  otherwise); a non-differentiable output (integer, bool, or a mutated input's new value)
 *  must have data == NULL. grads[num_grads] (written; grads[j] of input grad_input_index[j]). */
int aotc_rt_backward(aotc_rt_function *fn, const aotc_rt_tensor *in, int32_t n_in, const void *saved,
                     int64_t saved_bytes, const aotc_rt_tensor *tangents, int32_t n_tangents,
                     const aotc_rt_tensor *grads, int32_t n_grads);
/** <name>_eval (abi.h): the forward's outputs, nothing saved. AOTC_RT_ERROR_ABI without one. */
int aotc_rt_eval(aotc_rt_function *fn, const aotc_rt_tensor *in, int32_t n_in, const aotc_rt_tensor *out,
                 int32_t n_out);
/** Test hook: fills the scratch arena with 0xFF bytes (runtime.h poisonScratch). */
int aotc_rt_function_poison_scratch(aotc_rt_function *fn);

/*===--- A training step with its state (trainer.h) -----------------------===*/

typedef struct aotc_rt_trainer aotc_rt_trainer;

/** A trainer whose weights are the caller's buffers, used in place: weights[num_inputs] in
 *  program order, data == NULL for user inputs; parameters, buffers and constants must be
 *  given (dtype, shape, alignment checked); the RNG state may be NULL (then the trainer owns
 *  {seed, 0}). The buffers must outlive the trainer; each step updates them. */
int aotc_rt_trainer_create(const aotc_program *program, const aotc_rt_tensor *weights, int32_t n_weights,
                           uint64_t seed, aotc_rt_trainer **out);
/** A trainer owning copies of the weights in `weights_path` (readWeights: the build id and
 *  every parameter and buffer checked). */
int aotc_rt_trainer_create_from_file(const aotc_program *program, const char *weights_path, uint64_t seed,
                                     aotc_rt_trainer **out);
void aotc_rt_trainer_destroy(aotc_rt_trainer *t);

/** The buffer of input `index` (a weight, owned or borrowed, or the RNG state); NULL for a
 *  user input. */
int aotc_rt_trainer_input(aotc_rt_trainer *t, int32_t index, void **data);
/** Rebinds weight `index` of a trainer made by aotc_rt_trainer_create to another caller
 *  buffer (checked as there); AOTC_RT_ERROR_STATE for a trainer that owns its weights. */
int aotc_rt_trainer_bind(aotc_rt_trainer *t, int32_t index, const aotc_rt_tensor *weight);
/** Output k of the last step (0: the loss), read only, valid until the next step. */
int aotc_rt_trainer_output(aotc_rt_trainer *t, int32_t k, const void **data);

/** aotc_rt_trainer_step flags: abi.h AOTC_STEP_ACCUMULATE (needs --grad-accumulation). */
/** One step (or micro-batch) on the user inputs, in program order; *loss (may be NULL) gets
 *  output 0 as a double. */
int aotc_rt_trainer_step(aotc_rt_trainer *t, const aotc_rt_tensor *inputs, int32_t n_inputs, uint32_t flags,
                         double *loss);

/** Run-time hyperparameters by aotc_hyper_desc name: the range is checked on set. */
int aotc_rt_trainer_set_hyper(aotc_rt_trainer *t, const char *name, double value);
int aotc_rt_trainer_get_hyper(const aotc_rt_trainer *t, const char *name, double *value);

typedef struct aotc_rt_train_status {
  double grad_norm;   /**< Total 2-norm of the last update's gradients, before clipping. */
  int64_t steps;      /**< Updates done (skipped ones do not count). */
  int32_t nonfinite;  /**< The last loss or grad_norm was NaN or infinite. */
  int32_t skipped;    /**< nonfinite with --skip-nonfinite: nothing was updated. */
  int32_t accumulating; /**< Micro-batches are in the accumulators (the next step updates). */
  int32_t reserved;
} aotc_rt_train_status;
int aotc_rt_trainer_status(const aotc_rt_trainer *t, aotc_rt_train_status *out);

/** What a step whose loss or gradient norm is NaN or infinite does (trainer.h
 *  Trainer::OnNonfinite): WARN (the default: one line on stderr for the first, then counted),
 *  RAISE (the step returns AOTC_RT_ERROR_NONFINITE with the message), SKIP (counted silently;
 *  AOTC_RT_ERROR_ARGUMENT unless the object was compiled with --skip-nonfinite). */
#define AOTC_RT_NONFINITE_WARN 0
#define AOTC_RT_NONFINITE_RAISE 1
#define AOTC_RT_NONFINITE_SKIP 2
int aotc_rt_trainer_on_nonfinite(aotc_rt_trainer *t, int32_t policy);
/** Steps and micro-batches so far whose loss or gradient norm was not finite. */
int aotc_rt_trainer_nonfinite_count(const aotc_rt_trainer *t, int64_t *count);

/** The checkpoint (trainer.h save(); docs/training.md "Checkpoints": torch's names) as a
 *  safetensors image in memory: *bytes (free with aotc_rt_free) of *size bytes. Unlike save(),
 *  allowed in the middle of a gradient accumulation (the accumulators are not part of it). */
int aotc_rt_trainer_checkpoint(const aotc_rt_trainer *t, void **bytes, int64_t *size);
/** Restores from an image (trainer.h restore(): everything validated first, nothing changed
 *  on error). `what` names it in messages. */
int aotc_rt_trainer_restore(aotc_rt_trainer *t, const void *bytes, int64_t size, const char *what);
/** save() / load() to and from a file (written atomically). */
int aotc_rt_trainer_save(const aotc_rt_trainer *t, const char *path);
int aotc_rt_trainer_load(aotc_rt_trainer *t, const char *path);
/** Data parallel (trainer.h setCommunicator, docs/distributed.md): hands an abi.h aotc_comm
 *  (e.g. the one aotc_rt_mpi_create of libaotc_mpi.so fills) to the trainer of an object
 *  compiled with --data-parallel. Collective: every rank calls it (plan fingerprint compared,
 *  rank 0's state broadcast). NULL detaches. */
int aotc_rt_trainer_set_comm(aotc_rt_trainer *t, const aotc_comm *comm);
/** Test hook: poisons the saved area and train scratch (trainer.h poisonScratch). */
int aotc_rt_trainer_poison_scratch(aotc_rt_trainer *t);

/** Frees memory the runtime allocated for the caller (checkpoint images). NULL is ignored. */
void aotc_rt_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* AOTC_CAPI_H */
