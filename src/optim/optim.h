/* optim.h: optimizers over one flat weight vector (see exec.h), with the
 * update rules of PyTorch's torch.optim so that results can be compared.
 * Each algorithm is one file; this header is their common interface. */
#ifndef DL_OPTIM_H
#define DL_OPTIM_H

#include "core/error.h"
#include "core/real.h"
#include "spec/netspec.h"

struct dl_optim_algo {
    const char *name;
    int state_vectors; /* per-weight state arrays (momentum buffer, moments...) */
    /* One update of w[0..n) from g[0..n); t is the 1-based step count. */
    void (*step)(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                 dl_real *state, long n);
};

extern const struct dl_optim_algo dl_optim_sgd, dl_optim_adagrad, dl_optim_rmsprop, dl_optim_adam,
    dl_optim_adamw;

struct dl_optim {
    const struct dl_optim_algo *algo;
    struct dl_optim_spec spec;
    long n;
    dl_real *state;   /* algo->state_vectors x n, zero at start */
    long t;           /* steps taken */
};

/* Per-weight state arrays of spec's algorithm (its state_vectors), -1 for
 * an unknown kind. */
int dl_optim_state_vectors(const struct dl_optim_spec *spec);

/* Whether the steps of spec's algorithm keep per-weight state (SGD without
 * momentum keeps none: its slot stays zero). */
int dl_optim_keeps_state(const struct dl_optim_spec *spec);

int dl_optim_init(struct dl_optim *o, const struct dl_optim_spec *spec, long n, struct dl_error *err);
void dl_optim_free(struct dl_optim *o);
/* Applies one step with learning rate lr. */
void dl_optim_step(struct dl_optim *o, double lr, dl_real *w, const dl_real *g);

#endif
