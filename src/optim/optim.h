/* optim.h: optimizers over one flat weight vector (see exec.h), with the
 * update rules of PyTorch's torch.optim so that results can be compared,
 * and the layerwise ones (LARS, LAMB) whose step scales each parameter
 * tensor's update by a trust ratio of its norms: they are told the
 * tensors' runs of the vector (dl_optim_set_tensors).
 * Each algorithm is one file; this header is their common interface.  An
 * optimizer runs on one device (backends/device.h): its state is that
 * device's memory, and its steps are the update loops of that device (the
 * host's here; the GPU's in optim/cuda/optim.c, built --with-cuda), both
 * applying optim/update_rules.h's per-weight rules. */
#ifndef DL_OPTIM_H
#define DL_OPTIM_H

#include "backends/device.h"
#include "core/error.h"
#include "core/real.h"
#include "spec/netspec.h"

struct dl_optim_algo {
    const char *name;
    int state_vectors; /* per-weight state arrays (momentum buffer, moments...) */
    /* One update of w[0..n) from g[0..n); t is the 1-based step count;
     * state vector v of these weights is state + v * stride.  Every
     * pointer is memory of the algorithm's device.  DL_OK, or (a device's
     * loop) DL_ERR_INTERNAL when it could not be launched. */
    int (*step)(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                 dl_real *state, long n, long stride);
    /* A layerwise algorithm's (step NULL): one update of the whole parameter
     * tensor w[0..n), its trust ratio from the tensor's norms; adapt 0 (a
     * tensor no_decay leaves out): no weight decay and a ratio of 1; rows
     * > 0: the tensor is a matrix of that many rows that Muon
     * orthogonalises (struct dl_optim_span). */
    int (*tensor_step)(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                       dl_real *state, long n, long stride, int adapt, long rows);
    enum dl_optim_kind kind;
    enum dl_device_kind device; /* whose memory step() works in (0: the host's) */
};

extern const struct dl_optim_algo dl_optim_sgd, dl_optim_adagrad, dl_optim_rmsprop, dl_optim_adam,
    dl_optim_adamw, dl_optim_lars, dl_optim_lamb, dl_optim_muon;

/* The sum of the squares of x[0..n), in double (the layerwise norms). */
double dl_optim_sq_sum(const dl_real *x, long n);

/* Adam's and AdamW's per-step constants: the bias corrections 1 - beta^t
 * and AdamW's shrink factor 1 - lr wd (adam.c; the GPU's loops too). */
void dl_optim_adam_corrections(const struct dl_optim_spec *s, double lr, long t, double *c1, double *c2,
                               double *shrink);

/* The update loops of kind on device, or NULL when this build has none. */
const struct dl_optim_algo *dl_optim_algo_find(enum dl_optim_kind kind, enum dl_device_kind device);

/* A run of weights [begin, end): one that the weight decay leaves out, or
 * one parameter tensor. */
struct dl_optim_span {
    long begin, end;
    /* A parameter tensor's (dl_optim_set_tensors): > 0, the rows of a
     * hidden layer's weight matrix (its first dimension; the columns are
     * the others), which Muon orthogonalises; 0 for the others (biases,
     * norms, embeddings, the output layer: AdamW's step under Muon). */
    long rows;
};

struct dl_optim {
    const struct dl_optim_algo *algo;
    struct dl_optim_spec spec;
    long n;
    dl_real *state;   /* algo->state_vectors x n, zero at start, in device's memory */
    long t;           /* steps taken */
    const struct dl_device *device; /* where state, weights and gradients live (NULL: the host) */
    struct dl_optim_span *no_decay; /* sorted, disjoint; NULL: every weight decays */
    int n_no_decay;
    long offset;      /* the executor's index of its first weight (a ZeRO block's; 0 otherwise):
                         dl_optim_set_no_decay's spans are shifted by it and cut to [0, n) */
    struct dl_optim_span *tensors; /* a layerwise algorithm's parameter tensors, sorted, disjoint; NULL: [0, n)
                                      is one */
    int n_tensors;
};

/* Whether spec's algorithm is layerwise (LARS, LAMB: norms per tensor). */
int dl_optim_layerwise(const struct dl_optim_spec *spec);

/* Per-weight state arrays of spec's algorithm (its state_vectors), -1 for
 * an unknown kind. */
int dl_optim_state_vectors(const struct dl_optim_spec *spec);

/* The one formula of a rank's parameter memory (check, check --grid, the
 * trainer's report and the planner use it): bytes of `held` of the
 * `trainable` weights (all of them; fewer under ZeRO stage 3),
 * `gradients` gradient values (as many as the weights; fewer under ZeRO
 * stage 2) and the optimizer's state_vectors per weight (cut into `blocks`
 * equal blocks, one held: ZeRO over that many data-parallel ranks; 1
 * otherwise), and `state` other values (batch-norm statistics), 4 bytes
 * each.  spec NULL: SGD with momentum (one vector). */
double dl_optim_param_bytes(const struct dl_optim_spec *spec, double trainable, double held, double gradients,
                            double state, int blocks);
/* Its optimizer part alone: the state vectors of one block of `trainable`. */
double dl_optim_state_bytes(const struct dl_optim_spec *spec, double trainable, int blocks);

/* Whether the steps of spec's algorithm keep per-weight state (SGD without
 * momentum keeps none: its slot stays zero). */
int dl_optim_keeps_state(const struct dl_optim_spec *spec);

int dl_optim_init(struct dl_optim *o, const struct dl_optim_spec *spec, long n, struct dl_error *err);
/* The same on device: the state allocated (zeroed) there and the steps
 * that device's loops; DL_ERR_UNSUPPORTED when the build has none. */
int dl_optim_init_on(struct dl_optim *o, const struct dl_optim_spec *spec, long n, const struct dl_device *device,
                     struct dl_error *err);
void dl_optim_free(struct dl_optim *o);
/* The runs of weights that the weight decay leaves out (train.optimizer.
 * no_decay: biases, norms' and embeddings' weights; train/no_decay.h finds
 * them): copied, sorted and merged; steps then update each run with weight
 * decay 0 and the rest as before. */
int dl_optim_set_no_decay(struct dl_optim *o, const struct dl_optim_span *spans, int n, struct dl_error *err);
/* The runs of the parameter tensors (train/param_spans.h finds them), in
 * the executor's indices like dl_optim_set_no_decay's: a layerwise step
 * takes each tensor's norms over its run, the tensors that no_decay's runs
 * cover unadapted.  DL_ERR_UNSUPPORTED when a tensor is cut by [offset,
 * offset + n) (a ZeRO block): its norm would be a part's. */
int dl_optim_set_tensors(struct dl_optim *o, const struct dl_optim_span *spans, int n, struct dl_error *err);
/* How many of o's tensors no_decay's runs cover (their steps unadapted). */
int dl_optim_tensors_left_out(const struct dl_optim *o);
/* Applies one step with learning rate lr (w and g in the optimizer's
 * device's memory); DL_OK, or DL_ERR_INTERNAL when a device's loop could
 * not be launched (the host's loops cannot fail, and the host's callers
 * do not check). */
int dl_optim_step(struct dl_optim *o, double lr, dl_real *w, const dl_real *g);

#endif
