// The aotc replica loops compiled in their own TU so they can take -mprefer-vector-width=512.
#include "aotc_replica.h"
#include <stddef.h>
extern "C" void replica512_exp(const float *x, float *y, size_t n) { for (size_t i = 0; i < n; ++i) y[i] = aotc_expf(x[i]); }
extern "C" void replica512_log(const float *x, float *y, size_t n) { for (size_t i = 0; i < n; ++i) y[i] = aotc_logf(x[i]); }
extern "C" void replica512_sig(const float *x, float *y, size_t n) { for (size_t i = 0; i < n; ++i) y[i] = aotc_sigmoidf(x[i]); }
