/* gru.c: the gated recurrent unit (PyTorch nn.GRU, batch_first, zero
 * initial state; recurrent.h: shapes, parameters, stacking).  Gates in
 * PyTorch's order r, z, n, with ax = W_ih x_t + b_ih, ah = W_hh h_{t-1} +
 * b_hh; the reset gate multiplies the recurrent product after its bias
 * (oneDNN's linear-before-reset GRU, not Cho et al.'s original):
 *   r = s(ax_r + ah_r), z = s(ax_z + ah_z), n = tanh(ax_n + r ah_n),
 *   h_t = (1 - z) n + z h_{t-1}.
 * Backward, from dh_t:
 *   dn' = dh (1 - z) (1 - n^2)   (the gradient of n's argument)
 *   dz' = dh (h_{t-1} - n) z (1 - z),  dr' = dn' ah_n r (1 - r)
 *   dax = (dr', dz', dn'),  dah = (dr', dz', dn' r),  dh_{t-1} += dh z.
 * Saved a step: r, z, n, ah_n (H each). */
#include "ops/recurrent.h"

#include <math.h>

static void gru_cell_forward(const struct dl_rnn_attr *a, int H, const double *ax, const double *ah,
                             const dl_real *hp, const dl_real *prev, dl_real *ext, double *h)
{
    for (int j = 0; j < H; j++) {
        double r = dl_rnn_sigmoid(ax[j] + ah[j]), z = dl_rnn_sigmoid(ax[H + j] + ah[H + j]);
        double n = tanh(ax[2 * H + j] + r * ah[2 * H + j]);
        ext[j] = (dl_real)r, ext[H + j] = (dl_real)z, ext[2 * H + j] = (dl_real)n;
        ext[3 * H + j] = (dl_real)ah[2 * H + j];
        h[j] = (1 - z) * n + z * (double)hp[j];
    }
}

static void gru_cell_backward(const struct dl_rnn_attr *a, int H, const double *dh, double *carry,
                              const dl_real *hp, const dl_real *h, const dl_real *prev, const dl_real *ext,
                              double *dax, double *dah, double *dhp)
{
    for (int j = 0; j < H; j++) {
        double r = ext[j], z = ext[H + j], n = ext[2 * H + j], ahn = ext[3 * H + j];
        double dn = dh[j] * (1 - z) * (1 - n * n);
        dax[j] = dah[j] = dn * ahn * r * (1 - r);
        dax[H + j] = dah[H + j] = dh[j] * ((double)hp[j] - n) * z * (1 - z);
        dax[2 * H + j] = dn;
        dah[2 * H + j] = dn * r;
        dhp[j] = dh[j] * z;
    }
}

const struct dl_rnn_cell dl_rnn_cell_gru = {
    .gates = 3, .extra = 4, .forward = gru_cell_forward, .backward = gru_cell_backward};

DL_RNN_KIND_FUNCTIONS(gru, dl_rnn_cell_gru)

const struct dl_op_kind dl_op_gru = {
    .name = "gru",
    .summary = "gated recurrent unit over a sequence [T, C]: the hidden state of every step (PyTorch nn.GRU)",
    DL_RNN_KIND_FIELDS(gru, DL_RNN_SHARED_ATTRS),
};
