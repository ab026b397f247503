/* recurrent.h: what the recurrent layers (lstm, gru, rnn) share: their
 * attributes, PyTorch's parameters, the stacking of layers and directions,
 * and backpropagation through time (recurrent.c); each kind supplies only its
 * cell, one time step forward and back (lstm.c, gru.c, rnn.c).
 *
 * A layer reads a sequence [T, C] and writes the hidden state of every step,
 * [T, H] (or [T, 2H] bidirectional: the forward direction's H features, then
 * the reverse's, as PyTorch's batch_first output), the initial state zero.
 * Layer l > 0 of a stack reads layer l - 1's output.  Parameters per layer
 * and direction, PyTorch's names and layouts (nn.LSTM, nn.GRU, nn.RNN):
 * weight_ih_l{l}[_reverse] [G H, in], weight_hh_l{l} [G H, H], bias_ih_l{l}
 * [G H], bias_hh_l{l} [G H], G the gates (4, 3, 1) in PyTorch's order, all
 * drawn U(-1/sqrt(H), 1/sqrt(H)). */
#ifndef DL_OPS_RECURRENT_H
#define DL_OPS_RECURRENT_H

#include <math.h>

#include "ops/op.h"

struct dl_rnn_attr {
    int hidden;
    int layers;
    int bidirectional;
    int bias;
    double dropout;
    int nonlinearity; /* rnn only: DL_RNN_TANH or DL_RNN_RELU */
};

enum { DL_RNN_TANH, DL_RNN_RELU };

/* One time step of one direction of one layer, for H hidden units.  Forward:
 * from the input's and the previous state's products with their weights
 * plus biases, ax[G H] = W_ih x_t + b_ih and ah[G H] = W_hh h_{t-1} + b_hh,
 * and the previous step's saved values prev (NULL at the first step: a zero
 * state), writes h_t[H] and this step's saved values ext[extra H].
 * Backward: from dh[H], the gradient of h_t (from the output and from the
 * next step), and carry[H] (the gradient of a state other than h carried
 * from the next step, LSTM's cell; zero at the last step, updated for the
 * previous one), writes dax[G H] and dah[G H], the gradients of ax and ah,
 * and dhp[H], the part of h_{t-1}'s gradient that does not go through W_hh
 * (GRU's z h_{t-1}; zero otherwise).  hp is h_{t-1} (zeros at the first
 * step), h is h_t. */
struct dl_rnn_cell {
    int gates;
    int extra;
    void (*forward)(const struct dl_rnn_attr *a, int H, const double *ax, const double *ah, const dl_real *hp,
                    const dl_real *prev, dl_real *ext, double *h);
    void (*backward)(const struct dl_rnn_attr *a, int H, const double *dh, double *carry, const dl_real *hp,
                     const dl_real *h, const dl_real *prev, const dl_real *ext, double *dax, double *dah,
                     double *dhp);
};

/* The gates' logistic function, in double. */
static inline double dl_rnn_sigmoid(double x)
{
    return 1 / (1 + exp(-x));
}

/* The cells of lstm.c, gru.c and rnn.c (the fast kernels run them too). */
extern const struct dl_rnn_cell dl_rnn_cell_lstm, dl_rnn_cell_gru, dl_rnn_cell_rnn;

extern const struct dl_attr_desc dl_rnn_attrs[];
/* The table's entries: hidden, layers, bidirectional, bias, dropout (every
 * kind's), then rnn's nonlinearity. */
#define DL_RNN_SHARED_ATTRS 5
#define DL_RNN_ALL_ATTRS 6

int dl_rnn_check(const void *attr, struct dl_error *err);
int dl_rnn_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                 struct dl_error *err);
void dl_rnn_forward(const struct dl_op_call *c, const struct dl_rnn_cell *cell);
void dl_rnn_backward(const struct dl_op_call *c, const struct dl_rnn_cell *cell);
int dl_rnn_params(const void *attr, const struct dl_shape *in, int gates, struct dl_param_desc *p);
long dl_rnn_saved_size(const void *attr, int batch, const struct dl_shape *in, int extra);
double dl_rnn_flops(const void *attr, const struct dl_shape *in, int gates);

/* Dropout between stacked layers (PyTorch's dropout argument): in training,
 * layer l > 0 reads layer l - 1's output times these factors, 0 with
 * probability `dropout` and 1 / (1 - dropout) otherwise, one per element
 * [D H][T] of each sample, a hash of the call's key, l, the sample's place
 * in the mini-batch and the element's (as the dropout layer draws). */
int dl_rnn_dropping(const struct dl_op_call *c);
double dl_rnn_dropout_factor(const struct dl_op_call *c, int l, long n, long i);

/* A kind's functions on its cell CELL, named P_params, P_forward, ... */
#define DL_RNN_KIND_FUNCTIONS(P, CELL) \
    static int P##_params(const void *attr, const struct dl_shape *in, struct dl_shape out, \
                          struct dl_param_desc *p) \
    { \
        return dl_rnn_params(attr, in, (CELL).gates, p); \
    } \
    static long P##_saved_size(const void *attr, int batch, const struct dl_shape *in, struct dl_shape out) \
    { \
        return dl_rnn_saved_size(attr, batch, in, (CELL).extra); \
    } \
    static double P##_flops(const void *attr, const struct dl_shape *in, struct dl_shape out) \
    { \
        return dl_rnn_flops(attr, in, (CELL).gates); \
    } \
    static void P##_forward(const struct dl_op_call *c) \
    { \
        dl_rnn_forward(c, &(CELL)); \
    } \
    static void P##_backward(const struct dl_op_call *c) \
    { \
        dl_rnn_backward(c, &(CELL)); \
    }

/* A kind's fields but its name and summary, with the functions of
 * DL_RNN_KIND_FUNCTIONS(P, ...) and the first N_ATTRS attributes. */
#define DL_RNN_KIND_FIELDS(P, N_ATTRS) \
    .attrs = dl_rnn_attrs, .n_attrs = (N_ATTRS), .attr_size = sizeof(struct dl_rnn_attr), .min_inputs = 1, \
    .max_inputs = 1, .micro_batch = 1, .weight_products = 1, .check = dl_rnn_check, .infer = dl_rnn_infer, .params = P##_params, \
    .saved_size = P##_saved_size, .flops = P##_flops, .forward = P##_forward, .backward = P##_backward, \
    .backward_reads = DL_READS_DECLARED | DL_READS_INPUTS | DL_READS_OUTPUT

#endif
