/* train.c: `dltrain [train] --net FILE [options]`: loads the network, trains
 * it, prints progress and the final test accuracy, and optionally writes
 * metrics as JSON lines. */
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/kernel.h"
#include "cli/job_output.h"
#include "cli/option_table.h"
#include "cli/options.h"
#include "cli/run_scalars.h"
#include "cli/train_auto.h"
#include "comm/agree.h"
#include "comm/allreduce.h"
#include "comm/comm.h"
#include "comm/emulate.h"
#include "core/clock.h"
#include "core/parse.h"
#include "core/threads.h"
#include "data/dataset.h"
#include "graph/model_flops.h"
#include "io/metrics.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "train/checkpoint_dir.h"
#include "train/signals.h"
#include "train/trainer.h"

struct printer {
    const char *net_path;
    const struct dl_optim_spec *optim; /* the run's optimizer (its state's memory) */
    long log_every;
    int quiet;
    struct dl_metrics metrics;
    struct dl_run_scalars scalars; /* --tensorboard (rank 0) */
    double tokens_per_sample;    /* token inputs: positions per sample (tokens/s); 0 otherwise */
    double flops_per_token;      /* a language model's (graph/model_flops.h); 0 otherwise */
    double peak_flops;           /* the ranks' GEMM peak in the run's precision (rank 0's x ranks), for MFU */
    double t0;                   /* the start (dl_clock_now), for the steps' time_s */
    const struct dl_net_options *net_options; /* train.precision auto: what was measured */
    int regression;              /* a regression loss (graph.h's float_targets): no accuracy to report */
};

static void fmt_time(double s, char *buf, size_t n)
{
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

static void on_start(void *ctx, const struct dl_net *net, long train_n, long test_n, long steps, int ranks,
                     const char *strategy)
{
    struct printer *p = ctx;
    p->regression = net->graph.float_targets;
    p->tokens_per_sample = net->graph.id_limit > 0 ? (double)dl_shape_count(net->graph.input) : 0;
    p->flops_per_token = dl_graph_model_flops_per_token(&net->graph);
    if (p->flops_per_token > 0 && net->train.device == DL_DEVICE_CPU) { /* MFU: of the precision's measured peak */
        const char *lib, *core;
        p->peak_flops = 1e9 * ranks * (net->train.precision ? dl_kernel_bf16_gemm_peak(1024, &lib)
                                                            : dl_kernel_sgemm_peak(1024, &lib, &core));
    }
    p->t0 = dl_clock_now();
    if (p->quiet)
        return;
    const struct dl_train_spec *t = &net->train;
    printf("dltrain: training %s (%s) on %s: %ld training / %ld test samples\n", net->name, p->net_path,
           dl_dataset_kind_name(net->data.kind), train_n, test_n);
    if (ranks > 1)
        printf("  %d ranks, %s\n", ranks, strategy);
    printf("  %d layers, %ld parameters, batch %d, %ld steps/epoch, %d epoch%s, %s lr %g, %d thread%s, seed %llu\n",
           net->graph.n, dl_graph_param_count(&net->graph), t->batch, steps, t->epochs, t->epochs == 1 ? "" : "s",
           dl_optim_names[t->optim.kind], dl_schedule_base_lr(t), dl_threads_get(), dl_threads_get() == 1 ? "" : "s",
           (unsigned long long)t->seed);
    if (t->lr_scaling != DL_LR_SCALING_NONE)
        printf("  lr scaling %s: lr %g for reference batch %d, x %s%d/%d%s = %g for batch %d\n",
               dl_lr_scaling_names[t->lr_scaling], t->optim.lr, t->reference_batch,
               t->lr_scaling == DL_LR_SCALING_SQRT ? "sqrt(" : "", t->batch, t->reference_batch,
               t->lr_scaling == DL_LR_SCALING_SQRT ? ")" : "", dl_schedule_base_lr(t), t->batch);
    if (p->net_options && p->net_options->precision_auto) {
        char line[512];
        dl_precision_describe(&p->net_options->precision_probe, 1, line, sizeof line);
        printf("  %s\n", line);
    }
    if (p->net_options && p->net_options->tune_defaults.layers > 0)
        printf("  kernels: the tuning database's fastest on this CPU for %d of %d layers (--tune-db none: the "
               "built-in table)\n", p->net_options->tune_defaults.layers, net->graph.n);
    if (t->precision) { /* which layers compute in bf16, and through which kernels */
        char line[512];
        dl_precision_summary(net, NULL, line, sizeof line);
        printf("  %s\n", line);
        if (strstr(line, "reference-bf16")) /* said once, where it is seen */
            fprintf(stderr, "dltrain: warning: --precision bf16 emulates bf16 on some layers through f32 code "
                            "(reference-bf16: no bf16 kernel of this CPU runs them), which is slow\n");
    }
    fflush(stdout);
}

/* Each rank's planned memory: a "memory" line per rank in the metrics, and
 * the largest rank's on the screen when the ranks differ (a grid). */
static void on_memory(void *ctx, const struct dl_rank_memory *m, int n)
{
    struct printer *p = ctx;
    static const char *const keys[] = {"rank", "d", "t", "p", "slots", "arena_bytes", "weights", "state",
                                       "optimizer_state", "gradients"};
    int most = 0;
    double peak = 0;
    for (int r = 0; r < n; r++) {
        double vals[] = {m[r].rank, m[r].d, m[r].t, m[r].p, m[r].slots, m[r].arena_bytes, m[r].weights, m[r].state,
                         m[r].optimizer_state, m[r].gradients};
        dl_metrics_write(&p->metrics, "memory", 10, keys, vals);
        double bytes = m[r].arena_bytes + 4.0 * (m[r].weights + m[r].gradients + m[r].optimizer_state + m[r].state);
        dl_run_scalars_memory(&p->scalars, r, n, bytes);
        if (bytes > peak)
            most = r, peak = bytes;
    }
    if (p->quiet || n == 1 || (m[most].arena_bytes == m[0].arena_bytes && m[most].weights == m[0].weights))
        return;
    char arena[32], total[32];
    printf("  largest rank: %d (d=%d t=%d p=%d): %s planned (arena %s in %d executor%s, %.0f parameters, %.0f "
           "gradients, %.0f optimizer state)\n", most, m[most].d, m[most].t, m[most].p, dl_bytes_str(peak, total, sizeof total),
           dl_bytes_str(m[most].arena_bytes, arena, sizeof arena), m[most].slots, m[most].slots == 1 ? "" : "s",
           m[most].weights, m[most].gradients, m[most].optimizer_state);
    fflush(stdout);
}

static void on_step(void *ctx, const struct dl_step_report *r)
{
    struct printer *p = ctx;
    /* a server's update: its worker and staleness; a worker's step: the bytes it
     * sent; the consensus distance where measured */
    const char *keys[28] = {"epoch", "step", "global_step", "loss"};
    double vals[28] = {r->epoch, (double)r->step, (double)r->global_step, r->loss};
    int n = 4;
    if (!p->regression)
        keys[n] = "accuracy", vals[n++] = r->accuracy;
    const char *common[] = {"lr", "samples_per_s", "comm_s", "exposed_comm_s", "time_s"};
    const double common_vals[] = {r->lr, r->samples_per_s, r->comm_seconds, r->exposed_comm_seconds,
                                  dl_clock_now() - p->t0};
    for (int i = 0; i < 5; i++)
        keys[n] = common[i], vals[n++] = common_vals[i];
    if (p->tokens_per_sample > 0)
        keys[n] = "tokens_per_s", vals[n++] = r->samples_per_s * p->tokens_per_sample;
    double mfu = p->peak_flops > 0 ? p->flops_per_token * r->samples_per_s * p->tokens_per_sample / p->peak_flops : 0;
    if (mfu > 0)
        keys[n] = "mfu", vals[n++] = mfu;
    if (r->worker >= 0) {
        keys[n] = "worker", vals[n++] = r->worker;
        keys[n] = "staleness", vals[n++] = r->staleness;
    } else {
        keys[n] = "bytes_sent", vals[n++] = (double)r->bytes_sent;
    }
    if (isfinite(r->added_loss))
        keys[n] = "aux_loss", vals[n++] = r->added_loss;
    if (r->skipped || r->skipped_steps) {
        keys[n] = "skipped", vals[n++] = r->skipped;
        keys[n] = "skipped_steps", vals[n++] = (double)r->skipped_steps;
    }
    if (isfinite(r->expert_max_load)) {
        keys[n] = "expert_max_load", vals[n++] = r->expert_max_load;
        keys[n] = "expert_dropped", vals[n++] = r->expert_dropped;
    }
    if (isfinite(r->consensus_distance))
        keys[n] = "consensus_distance", vals[n++] = r->consensus_distance;
    if (isfinite(r->grad_norm))
        keys[n] = "grad_norm", vals[n++] = r->grad_norm;
    if (isfinite(r->step_seconds)) { /* this rank's step: waiting for input, exposed communication, the rest */
        keys[n] = "step_s", vals[n++] = r->step_seconds;
        keys[n] = "input_s", vals[n++] = r->input_seconds;
        double compute = r->step_seconds - r->input_seconds - r->exposed_comm_seconds;
        keys[n] = "compute_s", vals[n++] = compute > 0 ? compute : 0;
    }
    dl_metrics_write(&p->metrics, "step", n, keys, vals);
    for (int i = 0; i < r->n_expert_layers; i++) {
        const struct dl_expert_layer_load *x = &r->expert_layers[i];
        dl_metrics_write_experts(&p->metrics, r->global_step, x->layer, x->experts, x->taken, x->dropped, x->choices);
    }
    dl_run_scalars_step(&p->scalars, r, n - 3, keys + 3, vals + 3);
    if (r->skipped && !p->quiet)
        printf("step %ld: update skipped: %s (%ld skipped so far)\n", r->global_step, r->guard_why, r->skipped_steps);
    if (p->quiet || (r->step % p->log_every != 0 && r->step != r->steps_per_epoch))
        return;
    char eta[32];
    fmt_time(r->eta_s, eta, sizeof eta);
    char who[48] = "";
    if (r->worker >= 0)
        snprintf(who, sizeof who, "  worker %d staleness %d", r->worker, r->staleness);
    else if (isfinite(r->grad_norm))
        snprintf(who, sizeof who, "  grad norm %.4g", r->grad_norm);
    double rate = p->tokens_per_sample > 0 ? r->samples_per_s * p->tokens_per_sample : r->samples_per_s;
    char mfu_text[24] = "", aux_text[32] = "", acc_text[24] = "";
    if (!p->regression)
        snprintf(acc_text, sizeof acc_text, "  acc %6.2f%%", 100 * r->accuracy);
    if (mfu > 0)
        snprintf(mfu_text, sizeof mfu_text, "  MFU %.1f%%", 100 * mfu);
    if (isfinite(r->added_loss))
        snprintf(aux_text, sizeof aux_text, " (aux %.4g)", r->added_loss);
    printf("epoch %d/%d  step %5ld/%ld  loss %.6f%s%s  lr %.4g  %8.0f %s/s%s  ETA %s%s\n", r->epoch,
           r->epochs, r->step, r->steps_per_epoch, r->loss, aux_text, acc_text, r->lr, rate,
           p->tokens_per_sample > 0 ? "tokens" : "samples", mfu_text, eta, who);
    fflush(stdout);
}

/* " acc A%" (" top-5 B%" where counted) after a test loss, for a report's
 * test scores; "" for a regression loss, which has no accuracy. */
static const char *test_scores(const struct printer *p, const struct dl_epoch_report *r, char *buf, size_t n)
{
    buf[0] = '\0';
    if (p->regression)
        return buf;
    int k = snprintf(buf, n, " acc %.2f%%", 100 * r->test_accuracy);
    if (isfinite(r->test_top5) && k >= 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, " top-5 %.2f%%", 100 * r->test_top5);
    return buf;
}

/* The accuracies of an epoch or evaluation report into keys and vals from
 * n on (none for a regression loss; top-5 where counted); the new n. */
static int accuracy_metrics(const struct printer *p, const struct dl_epoch_report *r, int train, const char **keys,
                            double *vals, int n)
{
    if (p->regression)
        return n;
    if (train)
        keys[n] = "train_accuracy", vals[n++] = r->train_accuracy;
    keys[n] = "test_accuracy", vals[n++] = r->test_accuracy;
    if (isfinite(r->test_top5))
        keys[n] = "test_top5_accuracy", vals[n++] = r->test_top5;
    return n;
}

static void on_epoch(void *ctx, const struct dl_epoch_report *r)
{
    struct printer *p = ctx;
    const char *keys[8] = {"epoch", "train_loss", "test_loss", "seconds", "samples_per_s"};
    double vals[8] = {r->epoch, r->train_loss, r->test_loss, r->seconds, r->samples_per_s};
    dl_metrics_write(&p->metrics, "epoch", accuracy_metrics(p, r, 1, keys, vals, 5), keys, vals);
    dl_run_scalars_epoch(&p->scalars, r);
    if (p->quiet)
        return;
    char train_acc[24] = "", scores[48];
    if (!p->regression)
        snprintf(train_acc, sizeof train_acc, " acc %.2f%%", 100 * r->train_accuracy);
    printf("epoch %d/%d done: train loss %.4f%s | test loss %.4f%s | %.1f s, %.0f samples/s", r->epoch, r->epochs,
           r->train_loss, train_acc, r->test_loss, test_scores(p, r, scores, sizeof scores), r->seconds,
           r->samples_per_s);
    if (r->comm_seconds > 0)
        printf(" | allreduce %.2f s, %.0f%% hidden", r->comm_seconds,
               100 * (1 - (r->exposed_comm_seconds < r->comm_seconds ? r->exposed_comm_seconds / r->comm_seconds : 1)));
    printf("\n");
    fflush(stdout);
}

static void on_eval(void *ctx, long global_step, const struct dl_epoch_report *r)
{
    struct printer *p = ctx;
    const char *keys[6] = {"global_step", "test_loss", "test_samples"};
    double vals[6] = {(double)global_step, r->test_loss, (double)r->test_samples};
    dl_metrics_write(&p->metrics, "eval", accuracy_metrics(p, r, 0, keys, vals, 3), keys, vals);
    dl_run_scalars_eval(&p->scalars, global_step, r);
    if (p->quiet)
        return;
    char scores[48];
    printf("step %ld: test loss %.4f%s (%ld samples)\n", global_step, r->test_loss,
           test_scores(p, r, scores, sizeof scores), r->test_samples);
    fflush(stdout);
}

static void on_sample(void *ctx, long global_step, const char *text, size_t len)
{
    struct printer *p = ctx;
    if (p->quiet)
        return;
    printf("step %ld: sample ---\n", global_step);
    fwrite(text, 1, len, stdout);
    printf("\n---\n");
    fflush(stdout);
}

static void on_warning(void *ctx, const char *msg)
{
    fprintf(stderr, "dltrain: %s\n", msg);
    fflush(stderr);
}

/* RANK:MILLISECONDS of option opt (--debug-slow-rank, --debug-trace-skew). */
static int parse_rank_ms(const char *opt, const char *text, int *rank, double *ms, struct dl_error *err)
{
    const char *colon = strchr(text, ':');
    char r[32], what[64];
    if (!colon || colon - text >= (long)sizeof r)
        return dl_errorf(err, DL_ERR_SPEC, "%s: expected RANK:MILLISECONDS, found '%s'", opt, text);
    snprintf(r, sizeof r, "%.*s", (int)(colon - text), text);
    snprintf(what, sizeof what, "%s RANK", opt);
    int rc = dl_parse_int(what, r, 0, 1 << 20, rank, err);
    snprintf(what, sizeof what, "%s MILLISECONDS", opt);
    if (!rc)
        rc = dl_parse_double(what, colon + 1, 0, 1e9, ms, err);
    if (rc)
        dl_error_prefix(err, "%s %s", opt, text);
    return rc;
}

/* The grid of the run: --parallel (or the file's parallel.strategy) and
 * --grid (or the file's dp, tp, pp) on this many ranks; --grid alone means
 * hybrid.  *plan: 1 when the planner chooses the layout (--parallel auto
 * given here, or hybrid without a grid: *hybrid then).  Returns 0 or the
 * exit status after a message. */
static int resolve_grid(const char *cli, const char *grid, const struct dl_net *net, const struct dl_comm *comm,
                        struct dl_train_opts *train, int *plan, int *hybrid)
{
    int kind = (int)net->parallel.kind;
    *plan = *hybrid = 0;
    if (cli) {
        kind = -1;
        for (int i = 0; dl_parallel_names[i]; i++)
            if (strcmp(dl_parallel_names[i], cli) == 0)
                kind = i;
        if (kind < 0) {
            fprintf(stderr, "dltrain: --parallel: expected auto, none, data, model, pipeline or hybrid, found '%s'\n",
                    cli);
            return 2;
        }
    } else if (grid) {
        kind = DL_PAR_HYBRID;
    }
    struct dl_grid_dims want = {net->parallel.dp, net->parallel.tp, net->parallel.pp, 0, net->parallel.ep};
    struct dl_error err = {0};
    if (grid && dl_grid_parse(grid, &want, &err)) {
        fprintf(stderr, "dltrain: %s\n", err.msg);
        return 2;
    }
    int given = want.dp || want.tp || want.pp || want.ep > 1;
    if (kind == DL_PAR_HYBRID && !given && comm->size == 1) {
        fprintf(stderr, "dltrain: warning: parallel strategy 'hybrid' on one process: nothing to split, training on one "
                        "process\n");
        kind = DL_PAR_NONE;
    }
    /* --parallel auto here plans unless --grid is given; hybrid unless any grid is */
    if (comm->size > 1 && ((kind == DL_PAR_HYBRID && !given) || (cli && kind == DL_PAR_AUTO && !grid))) {
        *plan = 1;
        *hybrid = kind == DL_PAR_HYBRID;
        kind = DL_PAR_DATA, want = (struct dl_grid_dims){0, 0, 0}; /* until the plan says otherwise */
    }
    if (dl_grid_resolve((enum dl_parallel_kind)kind, want, comm->size, &train->grid, &err)) {
        fprintf(stderr, "dltrain: %s\n", err.msg);
        return 2;
    }
    return 0;
}

static void help(void)
{
    fputs("Usage: dltrain [train] --net FILE [options]\n"
          "Trains the network described by FILE and prints the test accuracy after every epoch.\n\n",
          stdout);
    dl_net_options_help(stdout);
    fputs("\nOutput options:\n"
          "  --metrics FILE        also write every step and epoch as JSON lines to FILE\n"
          "  --tensorboard DIR     also write them as TensorBoard event files in DIR (made if\n"
          "                        missing; a resumed run continues the same curves)\n"
          "  --log-every N         print a progress line every N steps (default 100)\n"
          "  --eval-every N        the test split's loss every N steps (also as \"eval\" in --metrics)\n"
          "  --sample-every N      a sample of the network's text every N steps (token networks;\n"
          "                        --sample-tokens, default 64, drawn at temperature 1)\n"
          "  --quiet               print only the final result\n"
          "  --dump-weights FILE   write the final weights as raw float32 (graph order) to FILE\n"
          "  --trace FILE          write a timeline of every rank (Chrome trace-event JSON for\n"
          "                        chrome://tracing or ui.perfetto.dev): steps, pipeline passes,\n"
          "                        layers, messages, allreduces, optimizer, idle time\n"
          "  --trace-steps N       record the first N steps in detail (default 20; 0: all, whose\n"
          "                        memory grows with the run)\n\n",
          stdout);
    fputs("Parallel options (several processes under mpirun or srun; rank 0 prints):\n"
          "  --comm NAME           auto (default), mpi, nccl or self\n"
          "  --comm-emulate alpha=TIME,bw=RATE  testing and teaching aid: delay every message as a\n"
          "                        network of latency TIME (20us, 5ms) and bandwidth RATE (1GB/s)\n"
          "                        would (the results do not change, only the time)\n"
          "  --parallel NAME       auto (default: data when several ranks run), none, data, model\n"
          "                        (tensor parallel), pipeline or hybrid (see --grid); auto given\n"
          "                        here with several ranks trains with the best layout of\n"
          "                        `dltrain plan` (grid, chunks, schedule, stage cuts) and prints it\n"
          "  --plan-flops RATE     with --parallel auto: time layers from their FLOPs at RATE FLOP/s\n"
          "                        (reproducible) instead of measuring them\n"
          "  --plan-trials N       with --parallel auto: train the best N layouts (at most 8) for\n"
          "                        4 steps each and keep the fastest measured (said when it overrules\n"
          "                        the model)\n"
          "  --grid dp=D,ep=E,tp=T,pp=P  the data x tensor x pipeline grid of ranks (any factor may\n"
          "                        be left out: 1, and dp takes the ranks left; ep: expert ranks within\n"
          "                        dp, each holding 1/E of every moe layer's experts); implies hybrid\n"
          "  --pipeline-chunks M   chunks per mini-batch (default 4*pp with a pipeline, else 1;\n"
          "                        on one process: gradient accumulation)\n"
          "  --pipeline-schedule S gpipe, 1f1b (default), interleaved:V (V stages per pipeline rank;\n"
          "                        chunks a multiple of pp) or zb-h1 (zero bubble: weight gradients\n"
          "                        deferred)\n"
          "  --consistency MODE    sync (default), ssp:S, async, local-sgd:K, gossip:TOPOLOGY (ring, exp,\n"
          "                        one-peer-exp or complete), easgd:TAU[,ALPHA] (default ALPHA 0.9/ranks)\n"
          "                        or easgd-async:TAU[,ALPHA] (the center on --ps-servers ranks)\n"
          "  --gossip-overlap      gossip: exchange the step's starting weights during forward and\n"
          "                        backward (D-PSGD) instead of after the optimizer step\n"
          "  --consensus-every N   measure the ranks' consensus distance every N steps (default 1, 0: never;\n"
          "                        one allreduce of the weights each time; gossip, easgd, local-sgd)\n"
          "  --allreduce NAME      auto (cost model), ring, recursive_doubling, rabenseifner, tree, ps, native\n"
          "  --compress CODEC      none, 1bit, qsgd:BITS or topk:FRACTION (error feedback per rank)\n"
          "  --grad-dtype fp32|bf16  the dtype gradient buckets travel in (sync): bf16 sends half\n"
          "                        the bytes, summed in f32 and rounded once (default fp32)\n"
          "  --bucket-bytes SIZE   gradient fusion bucket size (default 25M)\n"
          "  --no-overlap          start the allreduces after backward instead of during it\n"
          "  --sync-bn             batch-norm statistics over every rank's samples (default: per rank)\n"
          "  --ps-servers K        parameter-server ranks for ssp, async and easgd-async (default 1)\n"
          "  --stall-warning TIME  name ranks missing from a step's allreduce after TIME (default 60s)\n"
          "  --stall-timeout TIME  abort the job after TIME (default 600s), naming the first collective\n"
          "                        the ranks' flight records disagree on\n"
          "  --flight-recorder DIR where each rank writes its last calls on a stall (default\n"
          "                        CHECKPOINT-DIR/flight, else dltrain-flight)\n"
          "  (testing aids, --debug-*: doc/testing.md)\n\n",
          stdout);
    fputs("Step guards (sync; every rank skips alike):\n"
          "  --no-skip-nonfinite   stop at the first step whose loss is not finite (default: skip the\n"
          "                        update of a step whose loss or gradient norm is not finite)\n"
          "  --skip-spikes Z[:W]   also skip a step whose loss or gradient norm is more than Z standard\n"
          "                        deviations above the last W applied steps' (default W 128)\n"
          "  --max-skipped N       stop after N skipped steps in a row (default 10), with a checkpoint\n"
          "                        of the last applied step's weights where checkpoints go\n\n",
          stdout);
    fputs("Checkpoints (safetensors; see dltrain(1)):\n"
          "  --checkpoint-dir DIR  write DIR/ckpt-STEP.safetensors (rank 0), and one when SIGTERM,\n"
          "                        SIGINT or SIGUSR1 stops the run (exit status 75)\n"
          "  --checkpoint-every N  every N steps, or a time such as 90s, 15m, 2h\n"
          "  --keep N              keep the N newest checkpoints (default: all)\n"
          "  --resume [FILE]       continue from FILE, or from the newest valid checkpoint in DIR\n"
          "                        (starts from the beginning when there is none); a checkpoint\n"
          "                        holds whole tensors and resumes on any --grid or rank count\n"
          "  --strict-checkpoints  stop training when a checkpoint cannot be written\n"
          "  --checkpoint-async    the step waits only for the state's copy; a thread writes the file\n"
          "                        (one at a time; a stop signal's checkpoint is written at once)\n"
          "  --init-from FILE      start from the weights of a Hugging Face GPT-2 model.safetensors\n"
          "                        (fine-tuning; one process or data parallelism)\n\n"
          "SIZE: bytes, or a number with a unit: K, M, G, T (= KiB, MiB, GiB, TiB: powers of\n"
          "1024) or KB, MB, GB, TB (powers of 1000), e.g. 25M = 26214400, 25MB = 25000000.\n"
          "TIME: seconds, or a number with a unit s, m or h, e.g. 90, 15m, 2h.\n\n"
          "Exit status: 0 success, 1 run-time failure, 2 bad network file or option.\n",
          stdout);
}

/* Everything the command line asks for. */
struct train_command {
    struct dl_net_options net_options;   /* --net and the network file's overrides */
    struct dl_train_opts train_options;
    struct printer printer;              /* output options */
    const char *metrics_path, *tensorboard_dir, *comm_name, *parallel, *grid;
    double plan_flops;              /* --plan-flops: --parallel auto times layers from FLOPs */
    int plan_trials;                /* --plan-trials: --parallel auto times its best few */
    int plan_keep;                  /* --debug-plan-keep: testing aid, the trial kept (1-based; 0: fastest) */
    struct dl_comm_emulation emulation; /* --comm-emulate */
    int emulate;
};

/* The options whose values need more than a field set. */
static int take_allreduce(void *settings, const char *value, struct dl_error *err)
{
    ((struct train_command *)settings)->train_options.parallel.allreduce = value;
    return dl_allreduce_find(value) ? DL_OK
           : dl_errorf(err, DL_ERR_SPEC, "--allreduce: unknown algorithm '%s' (ring, recursive_doubling, "
                       "rabenseifner, tree, ps, native or auto)", value);
}

static int take_compress(void *settings, const char *value, struct dl_error *err)
{
    return dl_codec_parse(value, &((struct train_command *)settings)->train_options.parallel.codec, err);
}

static int take_grad_dtype(void *settings, const char *value, struct dl_error *err)
{
    return dl_precision_parse("--grad-dtype", value, &((struct train_command *)settings)->train_options.parallel.grad_dtype,
                              err);
}

static int take_consistency(void *settings, const char *value, struct dl_error *err)
{
    return dl_consistency_parse(value, &((struct train_command *)settings)->train_options.parallel, err);
}

/* --skip-spikes Z[:WINDOW] */
static int take_skip_spikes(void *settings, const char *value, struct dl_error *err)
{
    struct dl_step_guard_opts *g = &((struct train_command *)settings)->train_options.guard;
    const char *colon = strchr(value, ':');
    char z[32];
    snprintf(z, sizeof z, "%.*s", colon ? (int)(colon - value) : (int)strlen(value), value);
    int rc = dl_parse_double("--skip-spikes Z", z, 0.1, 1e6, &g->spike_z, err);
    if (!rc && colon)
        rc = dl_parse_int("--skip-spikes WINDOW", colon + 1, 2, 1 << 20, &g->window, err);
    return rc;
}

/* --debug-stop-calls or (crash 1) --debug-crash-calls STEP:RANK:LABEL */
static int stop_calls(void *settings, const char *value, int crash, struct dl_error *err)
{
    struct dl_train_opts *o = &((struct train_command *)settings)->train_options;
    const char *name = crash ? "--debug-crash-calls" : "--debug-stop-calls";
    char step[32] = "", rank[32] = "", what[64];
    int used = 0;
    if (sscanf(value, "%31[0-9]:%31[0-9]:%n", step, rank, &used) < 2 || !used || !value[used])
        return dl_errorf(err, DL_ERR_SPEC, "%s: expected STEP:RANK:LABEL, found '%s'", name, value);
    snprintf(o->stop_calls_label, sizeof o->stop_calls_label, "%s", value + used);
    o->stop_calls_crash = crash;
    snprintf(what, sizeof what, "%s STEP", name);
    int rc = dl_parse_long(what, step, 1, 1L << 40, &o->stop_calls_step, err);
    snprintf(what, sizeof what, "%s RANK", name);
    return rc ? rc : dl_parse_int(what, rank, 0, 1 << 20, &o->stop_calls_rank, err);
}

static int take_stop_calls(void *settings, const char *value, struct dl_error *err)
{
    return stop_calls(settings, value, 0, err);
}

static int take_crash_calls(void *settings, const char *value, struct dl_error *err)
{
    return stop_calls(settings, value, 1, err);
}

/* --debug-poison-grad STEP:RANK[:VALUE] */
static int take_poison(void *settings, const char *value, struct dl_error *err)
{
    struct dl_train_opts *o = &((struct train_command *)settings)->train_options;
    char step[32] = "", rank[32] = "", v[64] = "nan";
    if (sscanf(value, "%31[0-9]:%31[0-9]:%63s", step, rank, v) < 2)
        return dl_errorf(err, DL_ERR_SPEC, "--debug-poison-grad: expected STEP:RANK[:VALUE], found '%s'", value);
    int rc = dl_parse_long("--debug-poison-grad STEP", step, 1, 1L << 40, &o->poison_step, err);
    if (!rc)
        rc = dl_parse_int("--debug-poison-grad RANK", rank, 0, 1 << 20, &o->poison_rank, err);
    if (!rc)
        o->poison_value = strtod(v, NULL);
    return rc;
}

static int take_slow_rank(void *settings, const char *value, struct dl_error *err)
{
    struct dl_parallel_opts *par = &((struct train_command *)settings)->train_options.parallel;
    return parse_rank_ms("--debug-slow-rank", value, &par->slow_rank, &par->slow_rank_ms, err);
}

static int take_trace_skew(void *settings, const char *value, struct dl_error *err)
{
    struct dl_train_opts *train = &((struct train_command *)settings)->train_options;
    double ms = 0;
    int rc = parse_rank_ms("--debug-trace-skew", value, &train->trace_skew_rank, &ms, err);
    train->trace_skew_s = ms / 1e3;
    return rc;
}

static int take_checkpoint_every(void *settings, const char *value, struct dl_error *err)
{
    struct dl_train_opts *train = &((struct train_command *)settings)->train_options;
    struct dl_checkpoint_every ev = {0};
    int rc = dl_checkpoint_parse_every(value, &ev, err);
    train->every_steps = ev.steps;
    train->every_seconds = ev.seconds;
    return rc;
}

static int take_resume(void *settings, const char *value, struct dl_error *err)
{
    struct dl_train_opts *train = &((struct train_command *)settings)->train_options;
    (void)err;
    train->resume = 1;
    train->resume_path = value;
    return DL_OK;
}

static int take_schedule(void *settings, const char *value, struct dl_error *err)
{
    struct dl_train_opts *train = &((struct train_command *)settings)->train_options;
    return dl_schedule_parse(value, &train->pipeline_schedule, &train->pipeline_virtual, err);
}

static int take_comm_emulate(void *settings, const char *value, struct dl_error *err)
{
    struct train_command *cmd = settings;
    int rc = dl_comm_emulation_parse("--comm-emulate", value, &cmd->emulation, err);
    cmd->emulate = !rc;
    return rc;
}

/* train's own options, after the shared ones (options.h). */
static const struct dl_option train_options[] = {
    DL_OPTION_STRING("metrics", struct train_command, metrics_path),
    DL_OPTION_STRING("tensorboard", struct train_command, tensorboard_dir),
    DL_OPTION_LONG("log-every", struct train_command, printer.log_every, 1, 1L << 40),
    DL_OPTION_FLAG("quiet", struct train_command, printer.quiet, 1),
    DL_OPTION_STRING("comm", struct train_command, comm_name),
    DL_OPTION_STRING("parallel", struct train_command, parallel),
    DL_OPTION_CALL("allreduce", required_argument, take_allreduce),
    DL_OPTION_CALL("compress", required_argument, take_compress),
    DL_OPTION_CALL("grad-dtype", required_argument, take_grad_dtype),
    DL_OPTION_BYTES("bucket-bytes", struct train_command, train_options.parallel.bucket_bytes, 4, (size_t)1 << 40),
    DL_OPTION_FLAG("no-overlap", struct train_command, train_options.parallel.overlap, 0),
    DL_OPTION_CALL("consistency", required_argument, take_consistency),
    DL_OPTION_FLAG("gossip-overlap", struct train_command, train_options.parallel.gossip_overlap, 1),
    DL_OPTION_INT("consensus-every", struct train_command, train_options.parallel.consensus_every, 0, 1 << 30),
    DL_OPTION_INT("ps-servers", struct train_command, train_options.parallel.ps_servers, 1, 1 << 20),
    DL_OPTION_SECONDS("stall-warning", struct train_command, train_options.parallel.stall_warning_s, 1e7),
    DL_OPTION_SECONDS("stall-timeout", struct train_command, train_options.parallel.stall_timeout_s, 1e7),
    DL_OPTION_CALL("debug-slow-rank", required_argument, take_slow_rank),
    DL_OPTION_FLAG("skip-nonfinite", struct train_command, train_options.guard.nonfinite, 1),
    DL_OPTION_FLAG("no-skip-nonfinite", struct train_command, train_options.guard.nonfinite, 0),
    DL_OPTION_CALL("skip-spikes", required_argument, take_skip_spikes),
    DL_OPTION_INT("max-skipped", struct train_command, train_options.guard.max_in_a_row, 1, 1 << 30),
    DL_OPTION_CALL("debug-poison-grad", required_argument, take_poison),
    DL_OPTION_CALL("debug-stop-calls", required_argument, take_stop_calls),
    DL_OPTION_CALL("debug-crash-calls", required_argument, take_crash_calls),
    DL_OPTION_STRING("flight-recorder", struct train_command, train_options.flight_dir),
    DL_OPTION_LONG("debug-hold-at-step", struct train_command, train_options.hold_at_step, 1, 1L << 40),
    DL_OPTION_STRING("debug-dump-batches", struct train_command, train_options.dump_batches_path),
    DL_OPTION_STRING("dump-weights", struct train_command, train_options.dump_weights),
    DL_OPTION_FLAG("sync-bn", struct train_command, train_options.parallel.sync_bn, 1), /* the trainer then picks kernels with sync_stats */
    DL_OPTION_STRING("checkpoint-dir", struct train_command, train_options.checkpoint_dir),
    DL_OPTION_CALL("checkpoint-every", required_argument, take_checkpoint_every),
    DL_OPTION_INT("keep", struct train_command, train_options.keep, 1, 1000000),
    DL_OPTION_CALL("resume", optional_argument, take_resume),
    DL_OPTION_STRING("init-from", struct train_command, train_options.init_from),
    DL_OPTION_LONG("eval-every", struct train_command, train_options.eval_every, 1, 1L << 40),
    DL_OPTION_LONG("sample-every", struct train_command, train_options.sample_every, 1, 1L << 40),
    DL_OPTION_INT("sample-tokens", struct train_command, train_options.sample_tokens, 1, 1 << 20),
    DL_OPTION_FLAG("strict-checkpoints", struct train_command, train_options.strict_checkpoints, 1),
    DL_OPTION_FLAG("checkpoint-async", struct train_command, train_options.checkpoint_async, 1),
    DL_OPTION_STRING("grid", struct train_command, grid),
    DL_OPTION_INT("pipeline-chunks", struct train_command, train_options.pipeline_chunks, 1, DL_SCHED_MAX_CHUNKS),
    DL_OPTION_CALL("pipeline-schedule", required_argument, take_schedule),
    DL_OPTION_STRING("trace", struct train_command, train_options.trace_path),
    DL_OPTION_LONG("trace-steps", struct train_command, train_options.trace_steps, 0, 1L << 40),
    DL_OPTION_CALL("debug-trace-skew", required_argument, take_trace_skew),
    DL_OPTION_DOUBLE("plan-flops", struct train_command, plan_flops, 1, 1e20),
    DL_OPTION_INT("plan-trials", struct train_command, plan_trials, 1, DL_AUTO_MAX_TRIALS),
    DL_OPTION_INT("debug-plan-keep", struct train_command, plan_keep, 1, DL_AUTO_MAX_TRIALS),
    DL_OPTION_CALL("comm-emulate", required_argument, take_comm_emulate),
    DL_OPTION_END};

/* Parses argv into cmd; returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct train_command *cmd)
{
    struct dl_command_line line = {"dltrain", train_options, cmd, &cmd->net_options, help, .version = 1,
                                   .argument_hint = " (try --help)"};
    return dl_options_parse(&line, argc, argv, NULL);
}

/* Opens the world communicator (name: --comm, "auto" when the options
 * could not be read) and its emulation; returns 0 or the exit status
 * after a message. */
static int open_comm(struct train_command *cmd, const char *name, int *argc, char ***argv, struct dl_comm **comm)
{
    struct dl_error err = {0};
    if (dl_comm_open(name, argc, argv, comm, &err)) {
        fprintf(stderr, "dltrain: %s%s\n", err.code == DL_ERR_SPEC ? "--comm: " : "", err.msg);
        return err.code == DL_ERR_SPEC ? 2 : 1;
    }
    if (cmd->emulate && dl_comm_emulate(comm, &cmd->emulation, &err)) {
        fprintf(stderr, "dltrain: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* What every rank settles alike before the ranks agree (no collective
 * here): the grid, and whether the planner picks the layout. */
static int settle(struct train_command *cmd, struct dl_net *net, struct dl_comm *comm, int *plan, int *hybrid)
{
    struct dl_train_opts *train = &cmd->train_options;
    train->comm = comm;
    train->net_path = cmd->net_options.net_path;
    if (train->checkpoint_dir && !train->every_steps && !train->every_seconds)
        train->every_steps = 1000;
    return resolve_grid(cmd->parallel, cmd->grid, net, comm, train, plan, hybrid);
}

/* After the ranks agreed: the plan (--parallel auto, or hybrid without a
 * grid), who prints and the metrics file on rank 0; returns 0 or the exit
 * status. */
static int begin(struct train_command *cmd, struct dl_net *net, struct dl_comm *comm, int plan, int hybrid)
{
    struct dl_train_opts *train = &cmd->train_options;
    struct dl_error err = {0};
    if (cmd->emulate && comm->rank == 0 && !cmd->printer.quiet) {
        char what[96];
        printf("dltrain: emulating a network of %s (--comm-emulate)\n",
               dl_comm_emulation_str(&cmd->emulation, what, sizeof what));
    }
    dl_signals_install();
    int status = dl_net_precision_resolve(&cmd->net_options, net, comm, "dltrain");
    if (!status && plan)
        status = dl_train_auto_plan(net, &cmd->net_options, comm, cmd->plan_flops, cmd->plan_trials, cmd->plan_keep,
                                    hybrid, train, 1);
    if (comm->rank != 0)
        cmd->printer.quiet = 1;
    if (!status && cmd->metrics_path && comm->rank == 0 && dl_metrics_open(&cmd->printer.metrics, cmd->metrics_path, &err)) {
        fprintf(stderr, "dltrain: %s\n", err.msg);
        status = 1;
    }
    if (!status && cmd->tensorboard_dir && comm->rank == 0 &&
        dl_tensorboard_open(&cmd->printer.scalars.tb, cmd->tensorboard_dir, &err)) {
        fprintf(stderr, "dltrain: %s\n", err.msg);
        status = err.code == DL_ERR_SPEC ? 2 : 1;
    }
    return status;
}

/* Trains, with progress printed through the hooks; closes the metrics file. */
static int run(struct train_command *cmd, const struct dl_net *net, struct dl_train_result *res,
               struct dl_error *err)
{
    struct dl_train_hooks hooks = {.ctx = &cmd->printer, .on_memory = on_memory, .on_start = on_start,
                                   .on_step = on_step,
                                   .on_epoch = on_epoch, .on_warning = on_warning, .on_eval = on_eval,
                                   .on_sample = on_sample};
    dl_net_exec_options(&cmd->net_options, &cmd->train_options.exec);
    int rc = dl_train(net, &cmd->train_options, &hooks, res, err);
    if (!rc && cmd->printer.metrics.open)
        rc = dl_metrics_close(&cmd->printer.metrics, err);
    else if (cmd->printer.metrics.open)
        dl_metrics_close(&cmd->printer.metrics, NULL);
    /* The event file keeps what a failed or stopped run wrote (whole records). */
    int tb_rc = dl_run_scalars_close(&cmd->printer.scalars, rc ? NULL : err);
    rc = rc ? rc : tb_rc;
    return rc;
}

/* A failed run's message: printed once when every rank failed alike
 * (comm/agree.h), else by each failing rank, naming it; a rank that does
 * not know whether the others will end ends the job.  Returns the status. */
static int failed(struct dl_comm *comm, int rc, const struct dl_error *err)
{
    int status = rc == DL_ERR_SPEC ? 2 : 1;
    char line[sizeof err->msg + 16];
    snprintf(line, sizeof line, "dltrain: %s\n", err->msg);
    struct dl_agreement a = {status, 1, comm->size > 1, 1};
    if (rc != DL_ERR_COMM && comm->size > 1) /* a broken communicator cannot agree */
        dl_agree_failed(comm, status, dl_agree_hash(err->msg), DL_JOB_AGREE_SECONDS, &a);
    dl_job_output_print(line, comm->rank, &a);
    if (!a.all || rc == DL_ERR_COMM)
        comm->ops->abort(comm, a.status); /* peers may be stuck in a collective */
    return a.status;
}

/* The end of the run (rank 0 prints the summary); returns the exit status. */
static int report(const struct train_command *cmd, struct dl_comm *comm, int rc, const struct dl_train_result *res,
                  const struct dl_error *err)
{
    if (rc == DL_STOPPED) {
        if (comm->rank == 0)
            printf("stopped by a signal after step %ld%s%s; continue with --resume\n", res->steps,
                   res->last_checkpoint[0] ? ": checkpoint " : "", res->last_checkpoint);
        fflush(stdout);
        return res->last_checkpoint[0] || comm->rank != 0 ? DL_EXIT_PREEMPTED : 1;
    }
    if (rc)
        return failed(comm, rc, err);
    if (comm->rank != 0)
        return 0;
    if (res->last_checkpoint[0])
        printf("last checkpoint: %s\n", res->last_checkpoint);
    char top5[32] = "";
    if (isfinite(res->last.test_top5) && res->last.evaluated)
        snprintf(top5, sizeof top5, ", top-5 %.2f%%", 100 * res->last.test_top5);
    if (cmd->printer.regression)
        printf("final: test loss %.6g (%ld samples), after %ld steps in %.1f s\n", res->last.test_loss,
               res->last.test_samples, res->steps, res->seconds);
    else
        printf("final: test accuracy %.2f%%%s (%ld samples), test loss %.4f, after %ld steps in %.1f s\n",
               100 * res->last.test_accuracy, top5, res->last.test_samples, res->last.test_loss, res->steps,
               res->seconds);
    if (res->max_staleness > 0 || cmd->train_options.parallel.consistency == DL_CONS_SSP)
        printf("parameter server: largest staleness %d\n", res->max_staleness);
    enum dl_consistency mode = cmd->train_options.parallel.consistency;
    const char *exchange = mode == DL_CONS_GOSSIP ? "weight exchange with neighbours"
                         : mode == DL_CONS_EASGD ? "elastic averaging allreduce" : "gradient allreduce";
    if (res->comm_seconds > 0)
        printf("%s: %.2f s in total, %.2f s not hidden behind the step (%.0f%% hidden); "
               "%.1f MB sent by rank 0 (%.1f MB uncompressed)\n",
               exchange, res->comm_seconds, res->exposed_comm_seconds,
               100 * (1 - (res->exposed_comm_seconds < res->comm_seconds ? res->exposed_comm_seconds / res->comm_seconds
                                                                        : 1)),
               res->bytes_sent / 1e6, res->dense_bytes / 1e6);
    return 0;
}

int dl_cli_train(int argc, char **argv)
{
    struct train_command cmd = {.printer = {.log_every = 100}, .comm_name = "auto"};
    dl_net_options_init(&cmd.net_options);
    dl_train_opts_defaults(&cmd.train_options);
    /* Under a launcher, every rank reads the same options and files: what
     * they print until the ranks agree is printed once (job_output.h). */
    struct dl_job_output out;
    dl_job_output_capture(&out);
    int status = parse_args(argc, argv, &cmd);
    if (status == 0) { /* --help, --version */
        char *text = dl_job_output_release(&out);
        struct dl_agreement once = {0, 1, 0, 1};
        dl_job_output_print(text, 0, &once);
        free(text);
        return 0;
    }
    struct dl_net net = {0};
    cmd.net_options.precision_later = 1; /* begin(): rank 0 measures for all */
    if (status < 0)
        status = dl_net_options_load(&cmd.net_options, &net, "dltrain");
    cmd.printer.net_path = cmd.net_options.net_path;
    cmd.printer.net_options = &cmd.net_options;
    cmd.printer.optim = &net.train.optim;
    struct dl_comm *comm = NULL;
    int comm_status = open_comm(&cmd, status ? "auto" : cmd.comm_name, &argc, &argv, &comm);
    if (comm_status == 2 && !comm) /* --comm named no backend: the ranks still agree over the default */
        open_comm(&cmd, "auto", &argc, &argv, &comm);
    int plan = 0, hybrid = 0;
    if (!status)
        status = comm_status ? comm_status : settle(&cmd, &net, comm, &plan, &hybrid);
    char *text = dl_job_output_release(&out);
    struct dl_agreement a = {status, 1, 0, 1};
    struct dl_error err = {0};
    if (comm && text && dl_agree_all(comm, status, dl_agree_hash(text), &a, &err))
        fprintf(stderr, "dltrain: rank %d: %s\n", comm->rank, err.msg); /* then every rank prints its own */
    dl_job_output_print(text, comm ? comm->rank : 0, &a);
    free(text);
    status = a.status;
    if (!status)
        status = begin(&cmd, &net, comm, plan, hybrid);
    if (!status) {
        struct dl_train_result res;
        int rc = run(&cmd, &net, &res, &err);
        status = report(&cmd, comm, rc, &res, &err);
    }
    if (net.doc)
        dl_net_free(&net);
    dl_comm_close(comm);
    return status;
}
