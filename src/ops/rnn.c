/* rnn.c: the plain (Elman) recurrent layer (PyTorch nn.RNN, batch_first,
 * zero initial state; recurrent.h: shapes, parameters, stacking):
 *   h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh),  act tanh or relu.
 * Backward: da = dh (1 - h_t^2) for tanh, dh [h_t > 0] for relu, for both
 * W_ih and W_hh.  Nothing saved besides the outputs. */
#include "ops/recurrent.h"

#include <math.h>

static void rnn_cell_forward(const struct dl_rnn_attr *a, int H, const double *ax, const double *ah,
                             const dl_real *hp, const dl_real *prev, dl_real *ext, double *h)
{
    for (int j = 0; j < H; j++) {
        double v = ax[j] + ah[j];
        h[j] = a->nonlinearity == DL_RNN_RELU ? (v > 0 ? v : 0) : tanh(v);
    }
}

static void rnn_cell_backward(const struct dl_rnn_attr *a, int H, const double *dh, double *carry,
                              const dl_real *hp, const dl_real *h, const dl_real *prev, const dl_real *ext,
                              double *dax, double *dah, double *dhp)
{
    for (int j = 0; j < H; j++) {
        double y = (double)h[j];
        dax[j] = dah[j] = a->nonlinearity == DL_RNN_RELU ? (y > 0 ? dh[j] : 0) : dh[j] * (1 - y * y);
        dhp[j] = 0;
    }
}

const struct dl_rnn_cell dl_rnn_cell_rnn = {
    .gates = 1, .extra = 0, .forward = rnn_cell_forward, .backward = rnn_cell_backward};

DL_RNN_KIND_FUNCTIONS(rnn, dl_rnn_cell_rnn)

const struct dl_op_kind dl_op_rnn = {
    .name = "rnn",
    .summary = "plain recurrent layer (tanh or relu) over a sequence [T, C]: the hidden state of every step "
               "(PyTorch nn.RNN)",
    DL_RNN_KIND_FIELDS(rnn, DL_RNN_ALL_ATTRS),
};
