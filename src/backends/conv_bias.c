/* conv_bias.c: the bias gradient of a convolution on NCHW tensors, shared
 * by the convolution kernels that compute their own weight gradients
 * (im2col + GEMM, direct): one thread per output channel, sums in double. */
#include "backends/attr.h"

void dl_conv_bias_backward(const struct dl_op_call *c, int K, long PQ, int threads)
{
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int k = 0; k < K; k++) {
        double s = 0;
        for (int n = 0; n < c->batch; n++) {
            const float *dy = c->dout + ((long)n * K + k) * PQ;
            #pragma omp simd reduction(+ : s)
            for (long i = 0; i < PQ; i++)
                s += dy[i];
        }
        c->dparam[1][k] += (float)s;
    }
}
