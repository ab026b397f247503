/* numerics.h: finding where a NaN or infinity first appeared, for the message
 * that stops a diverging run ("step 812: the loss is nan; first non-finite
 * value: output of layer 'conv3'").  Forward outputs are scanned in graph
 * order right after the forward pass; weight gradients are checked layer by
 * layer as backward finishes each one (a gradient hook that chains to the
 * hook already installed, e.g. the data-parallel allreduce).  On a device
 * without host memory both read copies (exec.h's dl_exec_host_values). */
#ifndef DL_NUMERICS_H
#define DL_NUMERICS_H

#include "core/error.h"
#include "exec/exec.h"

enum dl_nonfinite_where { DL_NF_NONE, DL_NF_OUTPUT, DL_NF_WEIGHT_GRAD, DL_NF_PARAM };

struct dl_nonfinite {
    enum dl_nonfinite_where where;
    int layer;      /* graph index */
    long index;     /* first offending element (in the layer's output buffer, or its weight range) */
    double value;
    int param;      /* DL_NF_PARAM: which of the layer's parameters (index is into it) */
};

/* 1 when every value of x[0..n) is finite. */
int dl_numerics_all_finite(const dl_real *x, long n);

/* After dl_exec_forward (before backward: the executor reuses activation
 * memory for gradients): the first layer, in graph order, whose output for
 * the last batch holds a NaN or infinity.  Returns 1 and fills *nf, or 0. */
int dl_numerics_first_nonfinite_output(const struct dl_exec *e, struct dl_nonfinite *nf);

/* The first parameter (weight, bias or batch-norm statistic; in graph
 * order) of the layers e runs that holds a NaN or infinity: after an update
 * made the weights non-finite, before a checkpoint or the evaluation.
 * Returns 1 and fills *nf (where = DL_NF_PARAM), 0 when all are finite, or
 * -1 with err filled when a device's copy failed. */
int dl_numerics_first_nonfinite_param(const struct dl_exec *e, struct dl_nonfinite *nf, struct dl_error *err);

/* Watches weight gradients during backward.  install() puts a gradient hook in
 * front of e->hooks.grad_hook (which keeps being called); after each backward,
 * first holds the first layer in backward order whose weight gradients went
 * non-finite in this step (where = DL_NF_NONE when all were finite).  Call
 * dl_numerics_watch_reset before each backward and uninstall before
 * replacing e->hooks.grad_hook again. */
struct dl_numerics_watch {
    struct dl_exec *e;
    void (*next)(void *ctx, int layer);
    void *next_ctx;
    struct dl_nonfinite first;
};
void dl_numerics_watch_install(struct dl_numerics_watch *w, struct dl_exec *e);
void dl_numerics_watch_reset(struct dl_numerics_watch *w);
void dl_numerics_watch_uninstall(struct dl_numerics_watch *w);

/* The error that stops training: "step N: the loss is X; first non-finite
 * value: output of layer 'NAME' (TYPE), element I = V" (DL_ERR_DATA). */
int dl_numerics_error(const struct dl_graph *g, long global_step, double loss, const struct dl_nonfinite *nf,
                      struct dl_error *err);

/* The error for weights found non-finite after step global_step (nf from
 * dl_numerics_first_nonfinite_param; NULL: another rank's): "after step N:
 * the weights are no longer finite: parameter 'conv2.weight' (layer 'conv2',
 * conv), element I = V" (DL_ERR_DATA). */
int dl_numerics_param_error(const struct dl_graph *g, long global_step, const struct dl_nonfinite *nf,
                            struct dl_error *err);

#endif
