/* exec_impl.h: the executor's private structures, shared by exec.c (set-up,
 * parameters), steps.c (kernel choice, layouts, reorder steps, memory plan)
 * and run.c (forward and backward over the steps). */
#ifndef DL_EXEC_IMPL_H
#define DL_EXEC_IMPL_H

#include "exec/exec.h"
#include "plan/mbplan.h"
#include "plan/plan.h"

#define DL_EXEC_MAX_INSTANCES 64 /* (kernel, batch size) pairs with an instance per layer */

/* A value flowing between steps: the graph input, a layer's output, or a
 * reordered copy of one of those. */
struct dl_exec_tensor {
    int step;               /* producing step; -1: the graph input */
    struct dl_shape shape;
    enum dl_layout layout;
    long count;             /* values per sample in layout */
    int needs_grad;         /* 0 for the graph input and copies of it */
    int last_use;           /* last step reading it (forward order) */
    int buf_data, buf_grad; /* planner buffers, -1: none */
    dl_real *data, *grad;
};

struct dl_exec_instance {
    const struct dl_kernel *kernel;
    int mb;
    void *inst;
};

/* One step: a layer through its kernel, or a reorder from tensor src to dst. */
struct dl_exec_step {
    int layer;                          /* -1: reorder */
    int src;                            /* reorder: source tensor */
    int out;                            /* produced tensor */
    int in[DL_MAX_INPUTS];              /* layer: input tensors */
    int via_scratch[DL_MAX_INPUTS];     /* layer: input gradient goes through scratch, then is added */
    int buf_scratch[DL_MAX_INPUTS], buf_saved;
    dl_real *scratch[DL_MAX_INPUTS];
    unsigned char *saved;
    size_t saved_bytes;                 /* for max_batch samples */
    int timed_layer;                    /* layer whose time this step counts towards */
    const struct dl_kernel *kernel;
    struct dl_kernel_config cfg;
    int n_inst, n_fixed;                /* inst[0, n_fixed): made at set-up, never recycled */
    struct dl_exec_instance inst[DL_EXEC_MAX_INSTANCES];
    const struct dl_mbplan_layer *mbplan; /* layer: its micro-batch plan (NULL: undivided) */
};

struct dl_exec_impl {
    int n_steps, n_tensors;
    struct dl_exec_step *steps;
    struct dl_exec_tensor *tensors;
    int *out_tensor;                    /* [layer] */
    int *written;                       /* [tensor] gradient written in this backward */
    int n_bufs;
    struct dl_plan_buf *bufs;
    int buf_workspace;
    size_t workspace_bytes;
    void *arena;
    void *workspace;                    /* arena + its offset, or a larger block of its own */
    void *own_workspace;
    struct dl_mbplan mbplan;            /* copy of the options' plan (batch 0: none) */
};

/* steps.c */
int dl_exec_build_steps(struct dl_exec *e, const struct dl_kernel_choices *ch, struct dl_error *err);
int dl_exec_make_instance(struct dl_exec_step *s, const struct dl_layer *l, const struct dl_kernel *k, int mb,
                          struct dl_error *err);
int dl_exec_place(struct dl_exec *e, struct dl_error *err);
void dl_exec_free_steps(struct dl_exec *e);
/* The instance of step s for mb samples, made on first use (NULL after
 * setting e->status when it cannot be made). */
void *dl_exec_instance(struct dl_exec *e, struct dl_exec_step *s, int mb);

/* micro.c: layers run as a sequence of micro-batches (plan/mbplan.h).
 * Checks the plan of step s against the layouts its producers offer, makes
 * an instance per (kernel, micro-batch size), sizes its kernel state and
 * raises *ws to the workspace the plan needs. */
int dl_exec_micro_setup(struct dl_exec *e, struct dl_exec_step *s, const enum dl_layout *offered, size_t *ws,
                        struct dl_error *err);
/* Runs direction dir of step s over the parts of its plan; a holds the
 * whole batch's arguments.  Returns 0 when the step has no plan for this
 * batch size (the caller then runs it undivided). */
int dl_exec_micro_run(struct dl_exec *e, const struct dl_exec_step *s, const struct dl_kernel_args *a, enum dl_dir dir,
                      int any_din);

#endif
