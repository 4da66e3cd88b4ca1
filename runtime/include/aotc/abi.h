/*===- abi.h - The C ABI between aotc-generated objects and callers -*- C -*-===*
 *
 * An object emitted by `aotc IN -o OUT.o` exports, for a program named <name>:
 *
 *   aotc_context *<name>_context_create(void);
 *   void <name>_context_destroy(aotc_context *ctx);
 *   int <name>_forward(aotc_context *ctx, const void *const *in, void *const *out,
 *                      void *saved, void *scratch);
 *   int <name>_backward(aotc_context *ctx, const void *const *in, const void *saved,
 *                       const void *const *tangents, void *const *grads, void *scratch);
 *   extern const aotc_program <name>_program;
 *
 * The ABI context (aotc_context) is the state an object keeps between calls: the state of the
 * libraries it calls (for convolutions, libaotc_kernels' aotc_kernels_state: the oneDNN engine
 * and stream, primitives keyed by shape, their user-mode scratchpad, the text of the last
 * library error), created once by <name>_context_create (NULL when out of memory) and freed by
 * <name>_context_destroy. It is opaque; one context serves one thread at a time (use one per
 * thread). It is not the runtime's per-forward aotc::rt::SavedState (the saved area and inputs
 * one backward needs). Who owns what: the error code and value of a failed call live in the
 * caller's scratch (per call, below); library state and the library's error text live in the
 * context (program.context_error(ctx)); the saved area and scratch are the caller's.
 *
 * Buffers are dense, row-major, 64-byte aligned and owned by the caller:
 *  - in[i]       : forward inputs, in placeholder order (parameters and user inputs);
 *                  the backward receives the same inputs again;
 *  - out[i]      : forward outputs: user outputs first, then the new values of mutated inputs
 *                  (outputs[i].updates_input names the input; the object never writes an
 *                  input: the caller copies the new value into it, after the backward);
 *  - saved       : saved_bytes bytes; written by forward, read by backward
 *                  (intermediates only: inputs are never copied into it);
 *  - scratch     : scratch_bytes bytes; contents need not survive between calls;
 *  - tangents[i] : cotangent of out[i] (same shape/dtype); NULL for outputs that
 *                  are not differentiable (aotc_output_takes_tangent: integer/bool dtype,
 *                  or updates_input >= 0 without requires_grad);
 *  - grads[j]    : gradient of input grad_input_index[j]; overwritten, never accumulated.
 * Return value: 0 on success; k > 0 means error k: errors[k-1] names the node
 * and the int64 at scratch + error_value_offset holds the offending value (e.g.
 * an out-of-range index) of *that* call: two calls with distinct scratch arenas
 * failing at once each report their own value. When errors[k-1] is a library call's (a
 * convolution: "... failed in libaotc_kernels ..."), the value is the library's status and
 * program.context_error(ctx) the library's message. AOTC_ERROR_CONTEXT: `ctx` is NULL or
 * was created by another program's <name>_context_create (nothing was run).
 * Entry points are reentrant for distinct contexts and saved/scratch buffers.
 *
 * An object compiled with `aotc --sanitize=address` is instrumented by LLVM's
 * AddressSanitizer and checks its arena (AOTC_PROGRAM_CHECKED_ARENA): planned
 * buffers are separated by poisoned redzones and a scratch buffer is poisoned
 * while it is not live, so a kernel writing into its neighbour is reported. Link
 * such an object into a program built with -fsanitize=address (likewise
 * `--sanitize=thread` and -fsanitize=thread). The flags field says which.
 *
 * An object compiled with `--optimizer` (ABI 8) also exports
 *
 *   int <name>_train_step(aotc_context *ctx, void *const *in, void *const *out, void *saved,
 *                         void *state, const double *hyper, void *scratch, uint32_t flags);
 *
 * and program.train describes it (aotc_train, below): one training step, i.e. forward,
 * backward with d loss / d loss = 1 (the loss is output 0), the mutated inputs' new values
 * copied into in[] (batch-norm statistics, the RNG state), then the optimizer's update of every
 * parameter in place in in[] (or, with AOTC_STEP_ACCUMULATE in flags, the gradients added to
 * the state's accumulators instead: a micro-batch; the next call without the flag updates
 * with the sum). `saved` is saved_bytes as for forward; `scratch` is train->scratch_bytes;
 * `state` is train->state_bytes, persistent, zeroed by its creator before the first step and
 * then owned by the object (optimizer state, step count, accumulators, the step's status);
 * `hyper` holds train->num_hyper run-time hyperparameters (the learning rate first).
 *
 * Every CPU object (ABI 9) also exports
 *
 *   int <name>_eval(aotc_context *ctx, const void *const *in, void *const *out, void *scratch);
 *
 * (program.eval): the forward's outputs from the same in[] into the same out[], saving nothing
 * (no `saved` area; the kernels that only fed saved tensors are not run); scratch is
 * scratch_bytes. It computes what the exported graph computes: a graph exported in train mode
 * still uses batch statistics and dropout. For model.eval() behaviour compile the eval-mode
 * export too and run it with the same parameters (docs/training.md "Eval").
 *
 * build_id ties one compile's object, header (<NAME>_BUILD_ID) and weights file
 * (metadata "aotc.build_id") together; the runtime refuses a mixed set.
 *
 * An object emitted with `--target=cuda` (docs/cuda.md) exports the same context functions and
 *
 *   int <name>_forward(aotc_context *ctx, ..., void *scratch, const aotc_cuda_exec *exec);
 *   int <name>_backward(aotc_context *ctx, ..., void *scratch, const aotc_cuda_exec *exec);
 *   extern const aotc_cuda_program <name>_program;
 *
 * with the same arrays, holding *device* pointers aligned to AOTC_CUDA_ALIGNMENT,
 * and imports aotc_cuda_launch / aotc_cuda_matmul from the CUDA runtime
 * (runtime/cuda, aotc/cuda.h). See the second half of this file.
 *===----------------------------------------------------------------------===*/
#ifndef AOTC_ABI_H
#define AOTC_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** ABI versions (docs/abi.md "Versions"): abi_version = AOTC_ABI_MINOR << 16 | AOTC_ABI_MAJOR.
 *  A runtime runs every object of its major version, older or newer minor: a minor version only
 *  appends fields at the end of a struct (read only when the object's minor is new enough) or
 *  adds meanings to reserved fields that are 0 in older objects. Anything else (a field moved,
 *  removed or retyped, an entry point's signature changed) is a new major, refused by the
 *  runtime with a message asking for a recompile. Major 9 is the ninth incompatible layout;
 *  minor 0 is every object since it (ABI 9 before this scheme: the same value, 9); minor 1 adds
 *  AOTC_ERROR_NULL_ARGUMENT (objects check their pointer arguments); minor 2 sets requires_grad
 *  on the outputs that are new values of inputs requiring grad (they take a tangent). Major 10
 *  appends the kernel table and profile_attach to aotc_program, which moves the fields of
 *  aotc_cuda_program after its base: a new major. Minor 1 (10.1) appends the data-parallel
 *  fields to aotc_train (num_buckets, buckets, set_comm; docs/distributed.md) and uses the
 *  context's word 4 for the communicator. Minor 2 (10.2) adds ZeRO-1 (--data-parallel=zero1):
 *  aotc_comm's reduce_scatter_start and allgather_start, AOTC_STATE_SHARD, and aotc_train's
 *  zero1_world and set_comm_zero1 (a ZeRO-1 object's set_comm is NULL, so a 10.1 runtime, whose
 *  table lacks the two functions, refuses it instead of calling past its end). */
#define AOTC_ABI_MAJOR 10
#define AOTC_ABI_MINOR 2
#define AOTC_ABI_VERSION ((AOTC_ABI_MINOR << 16) | AOTC_ABI_MAJOR)
/** The major / minor parts of an aotc_program::abi_version. */
static inline uint32_t aotc_abi_major(uint32_t version) { return version & 0xFFFFu; }
static inline uint32_t aotc_abi_minor(uint32_t version) { return version >> 16; }
/** Alignment, in bytes, of every buffer passed to an entry point. */
#define AOTC_ALIGNMENT 64

/** Element types. AOTC_I32 and AOTC_U8 are index dtypes: graph inputs read by gather,
 *  index_select, embedding or scatter_add (and outputs that are views of such an input), and
 *  the few computed index values (docs/formats.md "Dtypes": the linalg ops' int32 pivots and
 *  info, which may be outputs and saved tensors; an index cast); no gradient uses them. */
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
  AOTC_ROLE_GRAD = 4,       /**< A gradient; `name` is the input's name. */
  AOTC_ROLE_CONSTANT = 5,   /**< A lifted tensor constant (ABI 6): read-only, never differentiated;
                                 `name` is torch.export's constant name; its value is in the weights
                                 file, as a parameter's. */
  AOTC_ROLE_RNG_STATE = 6   /**< The RNG state of a program that draws random numbers (ABI 7): int64[2]
                                 = {seed, offset} of Philox 4x32-10 (docs/randomness.md). The caller
                                 creates it (aotc::rt::rngState(seed)); an output with updates_input
                                 pointing at it holds the advanced state for the next step. */
} aotc_role;

/** 1 for the roles whose values come from the weights file (parameters, buffers, lifted
 *  constants), else 0. */
static inline int aotc_role_is_weight(int32_t role) {
  return role == AOTC_ROLE_PARAMETER || role == AOTC_ROLE_BUFFER || role == AOTC_ROLE_CONSTANT;
}

typedef struct aotc_tensor_desc {
  const char *name;     /**< FQN for parameters/buffers, else the graph name. */
  int32_t dtype;        /**< aotc_dtype */
  int32_t role;         /**< aotc_role */
  int32_t rank;
  int32_t requires_grad;/**< inputs: 1 when a gradient is produced. Outputs: 1 on the new value
                         *   of a mutated input that requires grad: it takes a tangent (ABI 9.2;
                         *   0 on every other output, whose tangent follows from its dtype). */
  const int64_t *shape; /**< rank entries (NULL when rank == 0). */
  int64_t numel;
  int64_t bytes;        /**< numel * itemsize */
  /** outputs only: the index (into inputs) of the input whose new value this output is (a
   *  mutated buffer, e.g. batch norm's running_mean or num_batches_tracked, or an input mutated
   *  in place), else -1. Such an output has no tangent unless requires_grad says it has (an
   *  input that requires grad, ABI 9.2); the caller writes it back into that input after the
   *  step. */
  int32_t updates_input;
  int32_t reserved;     /**< 0 */
} aotc_tensor_desc;

/** Whether backward takes a tangent for output `d` (the one rule; the compiler's is
 *  Program::outputHasTangent): a floating dtype, and for a mutated input's new value an input
 *  that requires grad (requires_grad set on the output, ABI 9.2). */
static inline int aotc_output_takes_tangent(const aotc_tensor_desc *d) {
  return (d->dtype == AOTC_F32 || d->dtype == AOTC_F64) && (d->updates_input < 0 || d->requires_grad);
}

/** Return value of an entry point given a NULL context or another program's. */
#define AOTC_ERROR_CONTEXT (-100)
/** Return value of an entry point given a NULL array or area that the call needs (in, out,
 *  saved, tangents, grads, state, hyper or scratch of a non-empty list / non-zero size; ABI
 *  9.1). Nothing was run. Checked after the context. */
#define AOTC_ERROR_NULL_ARGUMENT (-102)
/** Return value of train_step given AOTC_STEP_ACCUMULATE by an object compiled without
 *  --grad-accumulation (nothing was updated; the forward and backward ran). */
#define AOTC_ERROR_NO_ACCUMULATION (-101)

/** Return value of train_step when the communicator (aotc_comm, data parallel) returned an
 *  error: starting or waiting for an all-reduce failed (ABI 10.1). The step stopped before the
 *  update; comm->error(comm->self) says why. After *any* non-zero return of a step that
 *  communicated (this one, or a backward kernel's error after a bucket started), all-reduces it
 *  started may still be in flight, writing into its scratch, and the other ranks may be waiting
 *  in them: the caller must not step again but abort the job (aotc::rt::Trainer calls
 *  comm->abort). */
#define AOTC_ERROR_COMM (-103)
/** Return value of the train step of a ZeRO-1 object (--data-parallel=zero1, ABI 10.2) asked
 *  to update without a communicator: its optimizer state is one rank's shard, so it cannot
 *  step as one process (a micro-batch, AOTC_STEP_ACCUMULATE, needs none). Nothing was
 *  updated; the forward and backward ran. */
#define AOTC_ERROR_NO_COMM (-104)

/** The ABI context of one object (opaque; see the top of this file). */
typedef struct aotc_context aotc_context;
typedef aotc_context *(*aotc_context_create_fn)(void);
typedef void (*aotc_context_destroy_fn)(aotc_context *ctx);
/** The message of the last failed library call made with `ctx` (ABI 5), or NULL (none, a
 *  program without library state, NULL or another program's context). Valid until the next
 *  entry point call with ctx, or its destruction. */
typedef const char *(*aotc_context_error_fn)(const aotc_context *ctx);

typedef int (*aotc_forward_fn)(aotc_context *ctx, const void *const *in, void *const *out, void *saved,
                               void *scratch);
typedef int (*aotc_backward_fn)(aotc_context *ctx, const void *const *in, const void *saved,
                                const void *const *tangents, void *const *grads, void *scratch);
/** <name>_eval (ABI 9): the forward without saving anything. */
typedef int (*aotc_eval_fn)(aotc_context *ctx, const void *const *in, void *const *out, void *scratch);

/** aotc_program::flags bits. */
#define AOTC_PROGRAM_ASAN 1u          /**< Instrumented by AddressSanitizer (--sanitize=address). */
#define AOTC_PROGRAM_TSAN 2u          /**< Instrumented by ThreadSanitizer (--sanitize=thread). */
#define AOTC_PROGRAM_CHECKED_ARENA 4u /**< Redzones between planned buffers (--sanitize=address). */

/** aotc_state_desc::kind: what a tensor of the train step's state area is (ABI 8). */
typedef enum aotc_state_kind {
  AOTC_STATE_OPTIMIZER = 0,   /**< torch.optim state of one parameter: key exp_avg, exp_avg_sq,
                                   max_exp_avg_sq or momentum_buffer. */
  AOTC_STATE_STEP = 1,        /**< "optimizer.step": updates done, f32 0-d (torch's per-parameter
                                   `step`; it is the same for every parameter). */
  AOTC_STATE_ACCUM = 2,       /**< "accum.<fqn>": the gradient summed over earlier micro-batches. */
  AOTC_STATE_ACCUM_COUNT = 3, /**< "accum.count": micro-batches in the accumulators, f32 0-d. */
  AOTC_STATE_STATUS = 4,      /**< Written by every update: "status.grad_norm" (the total 2-norm of
                                   the gradients, before clipping) and "status.nonfinite" (bool: the
                                   loss or that norm is NaN or infinite); with --data-parallel also
                                   "dp.grad_scale" (f64 0-d: hyper grad_scale / world size, what
                                   the reduced gradient sum was multiplied by). */
  AOTC_STATE_ZEROS = 5        /**< "zeros.<output>": never written; the zero cotangent of a
                                   differentiable output other than the loss. */,
  AOTC_STATE_SHARD = 6        /**< ZeRO-1 (ABI 10.2): "optimizer.shard.<key>", a flat [S] tensor
                                   (key as OPTIMIZER) holding this rank's share of every
                                   parameter's state, laid out as its buckets' shares (see
                                   aotc_train::zero1_world). Rank-specific: never broadcast; a
                                   checkpoint gathers it into per-parameter tensors. */
} aotc_state_kind;

typedef struct aotc_state_desc {
  const char *name;     /**< "optimizer.state.<fqn>.<key>", "optimizer.step", "accum.<fqn>", ... */
  int32_t dtype;        /**< aotc_dtype */
  int32_t kind;         /**< aotc_state_kind */
  int32_t rank;
  int32_t param_input;  /**< Index into inputs of the parameter (OPTIMIZER, ACCUM), else -1. */
  const int64_t *shape; /**< rank entries (NULL when rank == 0). */
  int64_t numel;
  int64_t bytes;
  int64_t offset;       /**< Byte offset in the state area (64-byte aligned). */
  const char *key;      /**< OPTIMIZER: torch.optim's state key; else "". */
} aotc_state_desc;

/** One run-time hyperparameter (hyper[i]); value is the compiled default. A value must lie in
 *  [min, max] (max excluded when max_open; no upper bound when max < min). */
typedef struct aotc_hyper_desc {
  const char *name;     /**< "lr", "momentum", "dampening", "weight_decay", "beta1", "beta2", "eps", "max_norm" */
  double value;
  double min;
  double max;
  int32_t max_open;
  int32_t reserved;     /**< 0 */
} aotc_hyper_desc;

/** train_step flags. */
#define AOTC_STEP_ACCUMULATE 1u /**< A micro-batch: accumulate the gradients, do not update. */

typedef int (*aotc_train_step_fn)(aotc_context *ctx, void *const *in, void *const *out, void *saved,
                                  void *state, const double *hyper, void *scratch, uint32_t flags);

/** A communicator for data-parallel training (ABI 10.1; docs/distributed.md): a table of
 *  functions the caller fills and hands to a context with aotc_train::set_comm, so the object
 *  never links a communication library (aotc::rt::MpiCommunicator fills it from MPI,
 *  aotc::rt::NcclCommunicator from NCCL). Every
 *  function gets `self` first; those returning int return 0 on success, else an error whose
 *  text error(self) gives. The train step of an object compiled with --data-parallel calls
 *  allreduce_start right after the backward kernel that finishes a bucket's last gradient,
 *  progress between the kernels that follow (Open MPI does not progress a non-blocking
 *  collective on its own), and wait for every bucket before the update. Every rank must start
 *  the same all-reduces in the same order (the buckets of one plan; the runtime compares a
 *  fingerprint of it across ranks first). */
typedef struct aotc_comm {
  void *self;     /**< The implementation's state, passed back to every function. */
  int32_t rank;   /**< This process's rank, 0 <= rank < size. */
  int32_t size;   /**< The number of ranks (world size). */
  /** Starts an in-place sum all-reduce of `count` elements of `dtype` (aotc_dtype: F32, F64 or
   *  I64) at `buf`; *request receives a handle for test/wait. Each rank's result has the same
   *  bits. */
  int (*allreduce_start)(void *self, void *buf, int64_t count, int32_t dtype, int64_t *request);
  /** *done = 1 when the request has completed (then it must not be waited for), else 0. */
  int (*test)(void *self, int64_t request, int32_t *done);
  /** Blocks until the request completes (an implementation may time out with an error). */
  int (*wait)(void *self, int64_t request);
  /** Lets outstanding requests advance (MPI_Testall over them); cheap, called between kernels. */
  void (*progress)(void *self);
  /** Blocking broadcast of `bytes` bytes at `buf` from rank `root` (the runtime's: parameters,
   *  buffers and optimizer state from rank 0). */
  int (*broadcast)(void *self, void *buf, int64_t bytes, int32_t root);
  /** Blocking in-place sum all-reduce (the runtime's: the plan fingerprint check). */
  int (*allreduce)(void *self, void *buf, int64_t count, int32_t dtype);
  /** Ends every rank of the job with exit code `code` after printing `why` (MPI_Abort). */
  void (*abort)(void *self, int32_t code, const char *why);
  /** The text of the last error, or "" (valid until the next call). */
  const char *(*error)(void *self);
  /* ABI 10.2 (ZeRO-1; read only by objects with aotc_train::zero1_world > 0). */
  /** Starts a sum reduce-scatter: `send` holds size x count elements on every rank; rank r's
   *  `recv` (count elements, not overlapping send) receives the sum over ranks of elements
   *  [r count, (r + 1) count). *request as allreduce_start's. */
  int (*reduce_scatter_start)(void *self, const void *send, void *recv, int64_t count, int32_t dtype,
                              int64_t *request);
  /** Starts an all-gather: rank r's `count` elements at `send` land at recv + r count on every
   *  rank (recv holds size x count; send does not overlap it). */
  int (*allgather_start)(void *self, const void *send, void *recv, int64_t count, int32_t dtype,
                         int64_t *request);
} aotc_comm;

/** One all-reduce bucket of an object compiled with --data-parallel (ABI 10.1): gradients laid
 *  out contiguously in train_step's scratch, each 64-byte aligned (the padding between them is
 *  zeroed every step), reduced as one array. */
typedef struct aotc_bucket_desc {
  int32_t dtype;        /**< aotc_dtype of its gradients (F32 or F64). */
  int32_t num_grads;
  const int32_t *grads; /**< num_grads indices into program.grads, in the order they finish. */
  int64_t offset;       /**< Byte offset of the bucket in train_step's scratch (64-byte aligned). */
  int64_t count;        /**< Elements all-reduced, the padding between gradients included. */
  int32_t start_after;  /**< The backward kernel (its index in the kernel table's backward rows)
                         *   after which its all-reduce starts. */
  int32_t reserved;     /**< 0 */
} aotc_bucket_desc;

/** Hands a communicator to a context (ABI 10.1): its later train steps reduce the gradients
 *  over comm's ranks; NULL detaches (one process). The table must outlive its use. Returns 0,
 *  AOTC_ERROR_CONTEXT for a NULL or foreign context. */
typedef int (*aotc_set_comm_fn)(aotc_context *ctx, const aotc_comm *comm);

/** The train step of an object compiled with --optimizer (ABI 8). */
typedef struct aotc_train {
  const char *optimizer;        /**< "sgd", "adam" or "adamw" */
  const char *config;           /**< The canonical --optimizer text ("adamw:lr=0.001,...,maximize=0"). */
  double clip_grad_norm;        /**< --clip-grad-norm max norm; 0: no clipping. */
  int32_t skip_nonfinite;       /**< 1: a non-finite step leaves parameters and state unchanged. */
  int32_t grad_accumulation;    /**< 1: AOTC_STEP_ACCUMULATE is supported (--grad-accumulation). */
  int32_t reserved;             /**< 0 */
  int32_t num_params;
  const int32_t *param_inputs;  /**< Input indices of the updated parameters. */
  int32_t num_state;
  int32_t num_hyper;
  const aotc_state_desc *state;
  const aotc_hyper_desc *hyper;
  int64_t state_bytes;          /**< Size of the state area, bytes. */
  int64_t scratch_bytes;        /**< Size of train_step's scratch arena, bytes (>= scratch_bytes). */
  aotc_train_step_fn train_step;
  /* ABI 10.1 (read only when the object's minor is >= 1): data parallel (--data-parallel). */
  int32_t num_buckets;          /**< 0 without --data-parallel. */
  int32_t reserved2;            /**< 0 */
  const aotc_bucket_desc *buckets; /**< In the order their all-reduces start. */
  aotc_set_comm_fn set_comm;    /**< NULL without --data-parallel, and for ZeRO-1 (set_comm_zero1). */
  /* ABI 10.2 (read only when the object's minor is >= 2): ZeRO-1 (--data-parallel=zero1). */
  /** The number of ranks N the optimizer state is sharded over (--world-size), else 0. Each
   *  bucket's count is a multiple of N x (64 / element size); rank r owns elements
   *  [r count / N, (r + 1) count / N) of every bucket, which are laid end to end, bucket by
   *  bucket, at the start of each AOTC_STATE_SHARD tensor (the rest of it is zero padding). The
   *  step reduce-scatters the buckets, updates the shard, all-gathers the parameters. */
  int32_t zero1_world;
  int32_t reserved3;            /**< 0 */
  /** ZeRO-1's set_comm: needs a 10.2 table (reduce_scatter_start, allgather_start) of exactly
   *  zero1_world ranks; returns AOTC_ERROR_COMM for another size. NULL otherwise. aotc_comm has
   *  no size field (minor versions append), so a table built with an older abi.h reaches past
   *  its end here: build the table with this header (the runtime's MpiCommunicator and
   *  NcclCommunicator are; Trainer::setCommunicator refuses a table whose two functions are
   *  NULL). */
  aotc_set_comm_fn set_comm_zero1;
} aotc_train;

/** One kernel of an object, as `aotc --emit=kernels` lists it, with its static costs (ABI 10):
 *  what a profile divides the measured time by (docs/profiling.md). */
typedef struct aotc_kernel_desc {
  const char *graph;   /**< "forward", "backward", "eval", "update" or "accumulate" */
  const char *name;    /**< "k12": the kernel's name in that graph (--emit=kernels) */
  const char *kind;    /**< "loop", "gemm", "conv", "fft" or "linalg" */
  const char *ops;     /**< The fused ops, comma-separated ("add,relu"); a library call's op. */
  int64_t bytes;       /**< Bytes of the buffers it reads plus the bytes of those it writes (a
                        *   GEMM: of the operands it touches), each buffer once per direction:
                        *   the traffic if every byte moved once. */
  double flops;        /**< Floating-point operations: 2 per multiply-add of a GEMM or convolution;
                        *   a loop kernel's arithmetic instructions times their iterations. */
  int32_t dtype;       /**< aotc_dtype of a library call's operands, of a loop's first output. */
  int32_t trans;       /**< gemm: bit 0 op(A) transposed, bit 1 op(B); else 0. */
  /** gemm: C[m, n] += A[m, k] B[k, n], `batch` times. conv: the GEMM of the same work
   *  (m = N*OH*OW, n = K/groups, k = C/groups*KH*KW, batch = groups). Else 0. */
  int64_t m, n, k, batch;
} aotc_kernel_desc;

/** Attaches profile counters to a context (ABI 10): `counters` holds 2 * num_kernels int64,
 *  [2i] nanoseconds spent in kernel i (CLOCK_MONOTONIC, around the call), [2i+1] its calls;
 *  every later entry-point call with ctx adds to them, never clears them. NULL detaches (the
 *  default: a context without counters reads no clock). Returns 0, or AOTC_ERROR_CONTEXT for
 *  NULL or another program's context. The counters must outlive their attachment. */
typedef int (*aotc_profile_attach_fn)(aotc_context *ctx, int64_t *counters);

typedef struct aotc_program {
  uint32_t abi_version;          /**< AOTC_ABI_VERSION of the compiling aotc (minor << 16 | major) */
  const char *name;              /**< <name> */
  int32_t num_inputs;
  const aotc_tensor_desc *inputs;
  int32_t num_outputs;
  const aotc_tensor_desc *outputs;
  int32_t num_grads;
  const aotc_tensor_desc *grads;
  const int32_t *grad_input_index; /**< num_grads entries: index into inputs. */
  int64_t saved_bytes;           /**< Size of the saved area, bytes. */
  int64_t scratch_bytes;         /**< Size of the scratch arena, bytes (max of forward, backward and eval). */
  aotc_forward_fn forward;
  aotc_backward_fn backward;
  int32_t num_errors;
  const char *const *errors;     /**< Messages for return codes 1..num_errors. */
  /** Byte offset in the scratch arena of the int64 offending value of a failed call;
   *  -1 when no entry point can fail (num_errors == 0). CUDA objects: -1 (see below). */
  int64_t error_value_offset;
  const char *build_id;          /**< 32 hex digits: hash of the inputs, flags and aotc version. */
  uint32_t flags;                /**< AOTC_PROGRAM_* bits. */
  uint32_t reserved;             /**< 0 */
  aotc_context_create_fn context_create;   /**< <name>_context_create */
  aotc_context_destroy_fn context_destroy; /**< <name>_context_destroy */
  aotc_context_error_fn context_error;     /**< The library's error text (ABI 5; internal to the object). */
  const aotc_train *train;                 /**< The train step (ABI 8), NULL without --optimizer. */
  aotc_eval_fn eval;                       /**< <name>_eval (ABI 9); NULL in a CUDA object's base. */
  /** The object's kernels, for profiling (ABI 10; docs/profiling.md): num_kernels entries, in
   *  the order of the counters profile_attach takes. 0 / NULL / NULL in a CUDA object's base. */
  int32_t num_kernels;
  int32_t reserved2;                       /**< 0 */
  const aotc_kernel_desc *kernels;
  aotc_profile_attach_fn profile_attach;
} aotc_program;

/*===----------------------------------------------------------------------===*
 * CUDA target. No CUDA header is needed: CUDA handles travel as void*.
 *
 * Entry points are asynchronous: they only enqueue kernels and GEMMs on
 * exec->stream (no synchronization, allocation or host<->device copy), so a
 * whole training step can be captured in a CUDA graph. Return value:
 *   0   everything was enqueued;
 *   k>0 errors[k-1] of the descriptor: a tensor pointer that is not
 *       AOTC_CUDA_ALIGNMENT-aligned (the message names the tensor;
 *       *exec->host_error_value, when not NULL, holds the pointer: per exec, so two
 *       threads with their own execs report their own). Data-dependent errors (an index out of range) happen
 *       on the device: the kernel writes {code, value, program id} into
 *       exec->error_word and aotc_cuda_check() (aotc/cuda.h) reports them;
 *   AOTC_ERROR_CONTEXT: ctx is NULL or another program's (nothing was enqueued);
 *   AOTC_ERROR_NULL_ARGUMENT: an array or area the call needs, or exec, is NULL (ABI 9.1);
 *   other <0: the runtime failed (a CUDA or cuBLAS error): aotc_cuda_last_error().
 *===----------------------------------------------------------------------===*/

/** Alignment, in bytes, of every device pointer passed to a CUDA entry point. */
#define AOTC_CUDA_ALIGNMENT 256
/** Size, in bytes, of the device error word: int64 {code, value, program id, 0}. */
#define AOTC_CUDA_ERROR_WORD_BYTES 32

/** Where and with what a CUDA entry point enqueues its work (aotc_cuda_exec_create
 *  in aotc/cuda.h fills one). */
typedef struct aotc_cuda_exec {
  void *stream;           /**< cudaStream_t; NULL is the legacy default stream. */
  void *cublas;           /**< cublasHandle_t bound to `stream` (SGD's axpy). */
  void *cublaslt;         /**< cublasLtHandle_t (GEMMs). */
  void *workspace;        /**< Device memory for cuBLASLt, workspace_bytes bytes. */
  int64_t workspace_bytes;
  int64_t *error_word;    /**< Device memory, AOTC_CUDA_ERROR_WORD_BYTES, zeroed. */
  int32_t flags;          /**< 0 (reserved) */
  int32_t reserved;       /**< 0 */
  int64_t *host_error_value; /**< Host memory or NULL: the misaligned pointer of a k>0 return. */
} aotc_cuda_exec;

/** The kernels of one CUDA object (a constant inside it). */
typedef struct aotc_cuda_module {
  const char *program;             /**< <name> */
  uint32_t program_id;             /**< Written by failing kernels (error_word[2]). */
  int32_t num_kernels;
  const char *const *kernel_names; /**< "<name>_fwd_k1", ... (entry-point order). */
  const void *fatbin;              /**< cubins + PTX, for cudaLibraryLoadData. */
  int64_t fatbin_bytes;
  int32_t num_errors;
  const char *const *errors;       /**< The descriptor's errors (codes 1..num_errors). */
} aotc_cuda_module;

/** One GEMM, in the row-major terms of cblas_[sd]gemm(CblasRowMajor, ...):
 *  C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b], for b < batch, with
 *  X[b] = X + b * stride_x (elements). C is m x n; op(A) m x k; op(B) k x n. */
typedef struct aotc_cuda_gemm_desc {
  int32_t dtype;          /**< AOTC_F32 or AOTC_F64 */
  int32_t trans_a, trans_b;
  int32_t allow_tf32;     /**< 1 when compiled with --allow-tf32: f32 products may use TF32. */
  int64_t m, n, k, lda, ldb, ldc;
  int64_t batch, stride_a, stride_b, stride_c;
  double alpha, beta;
  const char *name;       /**< Kernel symbol ("<name>_fwd_k0"), for messages. */
} aotc_cuda_gemm_desc;

/** Enqueues kernel `kernel` of `module` (loaded from its fatbin once per process) on
 *  exec->stream with `grid` x `block` threads; args[i] points to the i-th argument. */
int aotc_cuda_launch(const aotc_cuda_exec *exec, const aotc_cuda_module *module, int32_t kernel,
                     uint32_t grid, uint32_t block, void **args);
/** Enqueues one GEMM (cuBLASLt on exec->cublaslt, algorithm cached per shape). */
int aotc_cuda_matmul(const aotc_cuda_exec *exec, const aotc_cuda_gemm_desc *gemm, const void *a,
                     const void *b, void *c);

typedef int (*aotc_cuda_forward_fn)(aotc_context *ctx, const void *const *in, void *const *out,
                                    void *saved, void *scratch, const aotc_cuda_exec *exec);
typedef int (*aotc_cuda_backward_fn)(aotc_context *ctx, const void *const *in, const void *saved,
                                     const void *const *tangents, void *const *grads,
                                     void *scratch, const aotc_cuda_exec *exec);

/** Descriptor of a CUDA object: `base` as for the CPU (its forward/backward are NULL,
 *  saved/scratch sizes are device bytes) plus the CUDA entry points. */
typedef struct aotc_cuda_program {
  aotc_program base;
  aotc_cuda_forward_fn forward;
  aotc_cuda_backward_fn backward;
  const char *archs;            /**< "sm_80,sm_90": cubins in the fatbin (PTX for the first). */
  const char *tool_versions;    /**< "ptxas: ...\nfatbinary: ..." version lines. */
  const aotc_cuda_module *module;
} aotc_cuda_program;

#ifdef __cplusplus
}
#endif

#endif /* AOTC_ABI_H */
