/* trainer.h: the training loop.  Loads the data, builds the executor and the
 * optimizer, runs epochs of mini-batch steps with the learning-rate schedule,
 * evaluates on the test split after every epoch, and reports progress through
 * callbacks (the library never prints; src/cli/ does). */
#ifndef DL_TRAINER_H
#define DL_TRAINER_H

#include "spec/netfile.h"

struct dl_step_report {
    int epoch, epochs;          /* 1-based epoch */
    long step, steps_per_epoch; /* 1-based step within the epoch */
    long global_step, total_steps;
    double loss;                /* mean loss of this batch */
    double accuracy;            /* fraction correct in this batch */
    double lr;
    double samples_per_s;       /* since the start of the epoch */
    double eta_s;               /* estimated seconds left in the run */
};

struct dl_epoch_report {
    int epoch, epochs;
    double train_loss, train_accuracy; /* means over the epoch's batches */
    double test_loss, test_accuracy;   /* over the whole test split */
    long test_samples;
    double seconds, samples_per_s;
};

struct dl_train_hooks {
    void *ctx;
    void (*on_start)(void *ctx, const struct dl_net *net, long train_samples, long test_samples,
                     long steps_per_epoch);
    void (*on_step)(void *ctx, const struct dl_step_report *r);
    void (*on_epoch)(void *ctx, const struct dl_epoch_report *r);
};

struct dl_train_result {
    struct dl_epoch_report last;
    long steps;
    double seconds;
};

int dl_train(const struct dl_net *net, const struct dl_train_hooks *hooks, struct dl_train_result *res,
             struct dl_error *err);

/* Evaluates the model of exec on a whole dataset in inference mode. */
struct dl_exec;
struct dl_dataset;
void dl_evaluate(struct dl_exec *exec, const struct dl_dataset *ds, int batch, double *loss,
                 double *accuracy);

#endif
