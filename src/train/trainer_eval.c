/* trainer_eval.c: the test evaluation where the strategy's layout says (a
 * slice per data-parallel rank, or the whole split on rank 0), and the
 * check that the weights are finite before anything uses them. */
#include "train/trainer_impl.h"

#include <math.h>

#include "core/clock.h"
#include "io/trace.h"
#include "train/numerics.h"

/* With expert ranks, every rank of an expert group runs as many forwards
 * as the others (their rows travel together); with ZeRO stage 3 every
 * data-parallel rank (each forward gathers the layers' weights): the most
 * batches of max_batch any of their slices of the n samples over p data
 * ranks needs. */
static long group_batches(const struct trainer *tr, long n, int p, int max_batch)
{
    int ep = tr->strategy && tr->strategy->zero_weights ? p : dl_grid_ep(&tr->grid.dims);
    int k0 = tr->data_comm->rank - tr->data_comm->rank % ep;
    long most = 0;
    for (int k = k0; k < k0 + ep; k++) {
        long count = n * (k + 1) / p - n * k / p, batches = (count + max_batch - 1) / max_batch;
        most = batches > most ? batches : most;
    }
    return most;
}

/* Forwards of the split's first sample whose results are dropped, so that
 * this rank runs `batches` forwards in all (with expert ranks). */
static int pad_forwards(struct trainer *tr, long batches, struct dl_error *err)
{
    struct dl_batcher one;
    int rc = dl_batcher_init_range(&one, &tr->data.test, 1, 0, 1, err), b = 0;
    const void *x;
    const int *y;
    if (!rc && (b = dl_batcher_next_view(&one, &x, &y)) <= 0)
        rc = b < 0 && one.error.code ? (*err = one.error, err->code) : dl_errorf(err, DL_ERR_INTERNAL, "no sample");
    for (long i = 0; !rc && i < batches; i++) {
        double loss;
        long correct[2];
        rc = dl_pipeline_evaluate(&tr->pipe, x, y, 1, &loss, correct, err);
    }
    dl_batcher_free(&one);
    return rc;
}

/* Test loss, accuracy and top-5 accuracy (NaN where there is none), where
 * the strategy's layout says: a slice per data-parallel rank, summed, or
 * the whole split on rank 0. */
static int evaluate(struct trainer *tr, struct dl_epoch_report *er, struct dl_error *err)
{
    long n = tr->data.test.n, first = 0, count = n;
    int split = tr->layout.eval == DL_EVAL_SPLIT;
    dl_watchdog_set_step(tr->watchdog, 0);
    if (split) {
        int p = tr->data_comm->size, k = tr->data_comm->rank;
        first = n * k / p;
        count = n * (k + 1) / p - first;
    } else if (tr->comm->rank != 0) {
        return DL_OK;
    }
    double t0 = tr->trace ? dl_clock_now() : 0;
    struct trainer_data *d = &tr->data;
    if (d->counts_labels && d->test_label_norm < 0) /* the divisor of the whole split's mean, every rank's */
        d->test_label_norm = dl_dataset_label_norm(&d->test, 0, n, d->ignored_label);
    tr->pipe.label_norm = d->counts_labels ? d->test_label_norm : 0;
    /* the samples are views of the split, or decoded from files on the way */
    struct dl_batcher reader;
    int rc = dl_batcher_init_range(&reader, &tr->data.test, dl_pipeline_exec(&tr->pipe)->max_batch, first, count, err);
    int b = 0;
    const void *x;
    const int *y;
    double sums[3] = {0, 0, 0}; /* loss, top-1 and top-5 correct */
    int max_batch = dl_pipeline_exec(&tr->pipe)->max_batch;
    int paired = tr->grid.experts || (tr->strategy && tr->strategy->zero_weights);
    long batches = split && paired ? group_batches(tr, n, tr->data_comm->size, max_batch) : 0;
    while (!rc && (b = dl_batcher_next_view(&reader, &x, &y)) > 0) {
        batches--;
        double loss;
        long correct[2];
        rc = dl_pipeline_evaluate(&tr->pipe, x, y, b, &loss, correct, err);
        sums[0] += loss;
        sums[1] += (double)correct[0];
        sums[2] += (double)correct[1];
    }
    if (!rc && b < 0) {
        *err = reader.error;
        rc = err->code ? err->code : DL_ERR_INTERNAL;
    }
    dl_batcher_free(&reader);
    if (!rc && batches > 0)
        rc = pad_forwards(tr, batches, err);
    if (!rc && split)
        rc = dl_comm_sum_small(tr->data_comm, sums, 3, err);
    if (!rc)
        rc = dl_trainer_agree_over_grid(tr, sums, 3, 3, err);
    dl_trace_span(tr->trace, DL_TRACE_EVAL, "evaluate", t0);
    if (rc)
        return rc;
    er->test_loss = n ? sums[0] / (double)n : 0;
    if (!isfinite(er->test_loss)) /* with finite weights (check_weights ran): an activation overflowed */
        return dl_errorf(err, DL_ERR_DATA, "the test loss is %g (the weights are finite, a layer's output "
                         "overflowed): lower the learning rate, or check the data", er->test_loss);
    const struct dl_graph *g = &tr->net->graph;
    double rows = (double)n * g->positions; /* correct positions */
    er->test_accuracy = g->float_targets ? NAN : n ? sums[1] / rows : 0; /* a regression loss has none */
    er->test_top5 = dl_exec_counts_top5(dl_pipeline_exec(&tr->pipe)) ? n ? sums[2] / rows : 0 : NAN;
    er->test_samples = n;
    er->evaluated = 1;
    return DL_OK;
}

/* The same; with the whole split on rank 0, ZeRO stage 3's weights are
 * gathered on every rank first (rank 0's forwards then gather nothing) and
 * released after. */
int dl_trainer_evaluate(struct trainer *tr, struct dl_epoch_report *er, struct dl_error *err)
{
    if (tr->layout.eval == DL_EVAL_SPLIT)
        return evaluate(tr, er, err);
    int rc = dl_trainer_weights_whole(tr, 1, err);
    if (!rc)
        rc = evaluate(tr, er, err);
    return rc ? rc : dl_trainer_weights_whole(tr, 0, err);
}

/* After the last step: the test evaluation wherever the model now is. */
int dl_trainer_evaluate_final(struct trainer *tr, struct dl_train_result *res, struct dl_error *err)
{
    struct dl_epoch_report er = res->last;
    er.epochs = tr->net->train.epochs; /* the epoch the run ended in: --max-steps may end it early */
    if (er.epoch < 1)
        er.epoch = er.epochs;
    int rc = dl_trainer_evaluate(tr, &er, err);
    if (!rc && er.evaluated) {
        res->last = er;
        if (tr->reporter && tr->hooks && tr->hooks->on_epoch)
            tr->hooks->on_epoch(tr->hooks->ctx, &er);
    }
    return rc;
}

/* The weights after global step `global_step` are finite (else DL_ERR_DATA
 * naming the first bad parameter): an update can make them NaN or infinite
 * with a finite loss (the last step's), and neither a checkpoint nor the
 * evaluation nor --dump-weights may go on with them.  The ranks of a grid
 * hold different parts and agree; data-parallel ranks hold the same weights
 * wherever this is called (a consistent step, the run's end). */
int dl_trainer_check_weights(struct trainer *tr, long global_step, struct dl_error *err)
{
    struct dl_nonfinite nf;
    int found = dl_numerics_first_nonfinite_param(dl_pipeline_exec(&tr->pipe), &nf, err);
    if (found < 0)
        return err->code ? err->code : DL_ERR_INTERNAL;
    double bad = found;
    if (tr->sharded) {
        int rc = dl_comm_sum_small(tr->grid.tensor, &bad, 1, err);
        if (!rc)
            rc = dl_comm_sum_small(tr->grid.pipeline, &bad, 1, err);
        if (rc)
            return rc;
    }
    if (bad == 0)
        return DL_OK;
    tr->nonfinite_stop = 1; /* every rank stops here */
    return dl_numerics_param_error(&tr->net->graph, global_step, found ? &nf : NULL, err);
}
