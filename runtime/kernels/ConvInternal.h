/*===- ConvInternal.h - Between Conv.c and ConvDnnl.c (libaotc_kernels) -*- C -*-===*
 *
 * Conv.c checks descriptors, dispatches and runs the im2col path; ConvDnnl.c owns the state
 * (aotc_kernels_state) and runs f32 convolutions through oneDNN; GemmDnnl.c shares its
 * control of oneDNN's thread count.
 *===----------------------------------------------------------------------===*/
#ifndef AOTC_KERNELS_CONV_INTERNAL_H
#define AOTC_KERNELS_CONV_INTERNAL_H

#include "aotc/kernels.h"

/** Bytes of a state's message buffer (with its NUL). */
#define AOTC_KERNELS_MESSAGE_BYTES 512

/** snprintf into msg (size bytes; nothing when msg is NULL). */
void aotc_kernels_format(char *msg, int64_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/** The state's message buffer (AOTC_KERNELS_MESSAGE_BYTES), or NULL for a NULL state. */
char *aotc_kernels_state_message(aotc_kernels_state *s);
/** Records the outcome of one aotc_conv: rc != 0 marks the message as the last error,
 *  prefixed with a description of `d`. */
void aotc_kernels_state_failed(aotc_kernels_state *s, const aotc_conv_desc *d, int rc);

/** An f32 convolution of a checked descriptor through oneDNN (the primitive of `d` from the
 *  state's cache, made on first use); the message goes to the state's buffer. */
int aotc_conv_dnnl(aotc_kernels_state *s, const aotc_conv_desc *d, const void *a, const void *b, void *c);

/** oneDNN's thread count. libdnnl calls omp_get_max_threads / omp_set_num_threads under
 *  version OMP_1.0, which the first such definition in the global scope serves: LLVM's libomp
 *  in aotc's own processes (this library's calls, under libomp's version VERSION, go there
 *  too), but torch's libgomp in a process that imported torch first (docs/python.md
 *  "Threads"). aotc_dnnl_threads_set sets the calling thread's nthreads-var to n in both, so
 *  that oneDNN runs inline in either, and returns the values to restore. */
typedef struct aotc_dnnl_threads { int ours, theirs; } aotc_dnnl_threads;
__attribute__((visibility("hidden"))) aotc_dnnl_threads aotc_dnnl_threads_set(int n);
__attribute__((visibility("hidden"))) void aotc_dnnl_threads_restore(aotc_dnnl_threads was);

#endif
