/* lstm.c: the long short-term memory layer (PyTorch nn.LSTM,
 * batch_first, zero initial state; recurrent.h: shapes, parameters,
 * stacking).  Gates in PyTorch's order i, f, g, o, a = W_ih x_t + b_ih +
 * W_hh h_{t-1} + b_hh:
 *   i = s(a_i), f = s(a_f), g = tanh(a_g), o = s(a_o)   (s the sigmoid)
 *   c_t = f c_{t-1} + i g,  h_t = o tanh(c_t).
 * Backward, from dh_t and dc carried from step t + 1 (its f dc):
 *   do = dh tanh(c_t),  dc = carried + dh o (1 - tanh^2 c_t),
 *   di = dc g,  df = dc c_{t-1},  dg = dc i,  carried to t - 1: dc f,
 *   da = (di i (1-i), df f (1-f), dg (1-g^2), do o (1-o)), for both W_ih and W_hh.
 * Saved a step: c, i, f, g, o (H each). */
#include "ops/recurrent.h"

#include <math.h>

static void lstm_cell_forward(const struct dl_rnn_attr *a, int H, const double *ax, const double *ah,
                              const dl_real *hp, const dl_real *prev, dl_real *ext, double *h)
{
    for (int j = 0; j < H; j++) {
        double i = dl_rnn_sigmoid(ax[j] + ah[j]), f = dl_rnn_sigmoid(ax[H + j] + ah[H + j]);
        double g = tanh(ax[2 * H + j] + ah[2 * H + j]), o = dl_rnn_sigmoid(ax[3 * H + j] + ah[3 * H + j]);
        double cell = f * (prev ? (double)prev[j] : 0) + i * g;
        ext[j] = (dl_real)cell, ext[H + j] = (dl_real)i, ext[2 * H + j] = (dl_real)f;
        ext[3 * H + j] = (dl_real)g, ext[4 * H + j] = (dl_real)o;
        h[j] = o * tanh(cell);
    }
}

static void lstm_cell_backward(const struct dl_rnn_attr *a, int H, const double *dh, double *carry,
                               const dl_real *hp, const dl_real *h, const dl_real *prev, const dl_real *ext,
                               double *dax, double *dah, double *dhp)
{
    for (int j = 0; j < H; j++) {
        double cell = ext[j], i = ext[H + j], f = ext[2 * H + j], g = ext[3 * H + j], o = ext[4 * H + j];
        double tc = tanh(cell), cp = prev ? (double)prev[j] : 0;
        double dc = carry[j] + dh[j] * o * (1 - tc * tc);
        dax[j] = dc * g * i * (1 - i);
        dax[H + j] = dc * cp * f * (1 - f);
        dax[2 * H + j] = dc * i * (1 - g * g);
        dax[3 * H + j] = dh[j] * tc * o * (1 - o);
        carry[j] = dc * f;
        dhp[j] = 0;
    }
    for (int k = 0; k < 4 * H; k++)
        dah[k] = dax[k];
}

const struct dl_rnn_cell dl_rnn_cell_lstm = {
    .gates = 4, .extra = 5, .forward = lstm_cell_forward, .backward = lstm_cell_backward};

DL_RNN_KIND_FUNCTIONS(lstm, dl_rnn_cell_lstm)

const struct dl_op_kind dl_op_lstm = {
    .name = "lstm",
    .summary = "long short-term memory over a sequence [T, C]: the hidden state of every step (PyTorch nn.LSTM)",
    DL_RNN_KIND_FIELDS(lstm, DL_RNN_SHARED_ATTRS),
};
