/* options.c: the shared network options (see options.h). */
#include "cli/options.h"

#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "backends/kernel.h"
#include "core/threads.h"
#include "exec/exec.h"

void dl_net_options_init(struct dl_net_options *o)
{
    memset(o, 0, sizeof *o);
    dl_tune_options_default(&o->tune);
}

void dl_net_exec_options(struct dl_net_options *o, struct dl_exec_options *out)
{
    *out = (struct dl_exec_options){.kernels = &o->kernels};
    if (o->tune_on)
        out->tuner = (struct dl_exec_tuner){dl_tune_exec_plan, &o->tune};
}

int dl_parse_bytes(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || errno || !isfinite(v) || v < 0)
        return -1;
    int shift = 0;
    if (*end) { /* k, M, G, T with an optional B or iB: binary multiples */
        static const char units[] = "kmgt";
        const char *u = strchr(units, tolower((unsigned char)*end));
        if (!u)
            return -1;
        shift = 10 * (int)(u - units + 1);
        end++;
        if (*end && strcasecmp(end, "b") != 0 && strcasecmp(end, "ib") != 0)
            return -1;
    }
    double b = ldexp(v, shift);
    if (b > 1e18)
        return -1;
    *out = (size_t)b;
    return 0;
}

/* --tune and the tuner's settings (see options.h). */
static int tune_option(struct dl_net_options *o, int opt, const char *arg, const char *prog)
{
    size_t bytes;
    switch (opt) {
    case DL_OPT_TUNE:
        o->tune_on = 1;
        return 1;
    case DL_OPT_WORKSPACE_LIMIT:
    case DL_OPT_WORKSPACE_TOTAL:
        if (dl_parse_bytes(arg, &bytes)) {
            fprintf(stderr, "%s: --workspace-%s: expected bytes such as 67108864, 64M or 1GiB, found '%s'\n", prog,
                    opt == DL_OPT_WORKSPACE_LIMIT ? "limit" : "total", arg);
            return -1;
        }
        *(opt == DL_OPT_WORKSPACE_LIMIT ? &o->tune.workspace_limit : &o->tune.workspace_total) = bytes;
        return 1;
    case DL_OPT_TUNE_DB: o->tune.db_path = arg; return 1;
    case DL_OPT_TUNE_POLICY:
        for (int i = 0; dl_tune_policy_names[i]; i++)
            if (strcmp(arg, dl_tune_policy_names[i]) == 0) {
                o->tune.policy = (enum dl_tune_policy)i;
                return 1;
            }
        fprintf(stderr, "%s: --tune-policy: expected undivided, powerOfTwo or all, found '%s'\n", prog, arg);
        return -1;
    }
    return 0;
}

int dl_net_option(struct dl_net_options *o, int opt, const char *arg, const char *prog)
{
    if (opt == DL_OPT_NET) {
        o->net_path = arg;
        return 1;
    }
    if (opt == DL_OPT_THREADS) {
        char *end;
        errno = 0;
        long v = strtol(arg, &end, 10);
        if (*arg == 0 || *end || errno || v < 1 || v > 4096) {
            fprintf(stderr, "%s: --threads: expected an integer in [1, 4096], found '%s'\n", prog, arg);
            return -1;
        }
        o->threads = (int)v;
        return 1;
    }
    if (opt == DL_OPT_KERNEL) {
        struct dl_error err = {0};
        if (dl_kernel_choice_add(&o->kernels, arg, &err)) {
            fprintf(stderr, "%s: %s\n", prog, err.msg);
            return -1;
        }
        return 1;
    }
    if (opt == DL_OPT_NO_FUSION) {
        o->kernels.no_fusion = 1;
        return 1;
    }
    if (opt >= DL_OPT_TUNE && opt <= DL_OPT_TUNE_POLICY)
        return tune_option(o, opt, arg, prog);
    if (opt < DL_OPT_EPOCHS || opt > DL_OPT_MAX_STEPS)
        return 0;
    if (o->n == DL_MAX_OVERRIDES) {
        fprintf(stderr, "%s: too many options\n", prog);
        return -1;
    }
    o->codes[o->n] = opt;
    o->values[o->n++] = arg;
    return 1;
}

static int parse_long(const char *opt, const char *s, long min, long max, long *out, struct dl_error *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < min || v > max)
        return dl_errorf(err, DL_ERR_SPEC, "--%s: expected an integer in [%ld, %ld], found '%s'", opt, min, max, s);
    *out = v;
    return DL_OK;
}

static int parse_double(const char *opt, const char *s, double min, double max, double *out, struct dl_error *err)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v < min || v > max)
        return dl_errorf(err, DL_ERR_SPEC, "--%s: expected a number in [%g, %g], found '%s'", opt, min, max, s);
    *out = v;
    return DL_OK;
}

static int parse_choice(const char *opt, const char *s, const char *const *names, int *out, struct dl_error *err)
{
    char list[256] = "";
    for (int i = 0; names[i]; i++) {
        if (strcmp(names[i], s) == 0) {
            *out = i;
            return DL_OK;
        }
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, names[i], sizeof list - strlen(list) - 1);
    }
    return dl_errorf(err, DL_ERR_SPEC, "--%s: expected one of %s, found '%s'", opt, list, s);
}

static int apply(struct dl_net *net, int code, const char *v, struct dl_error *err)
{
    struct dl_train_spec *t = &net->train;
    struct dl_optim_spec *o = &t->optim;
    long l;
    int k;
    switch (code) {
    case DL_OPT_EPOCHS:
        if (parse_long("epochs", v, 1, 1 << 24, &l, err))
            return DL_ERR_SPEC;
        t->epochs = (int)l;
        return DL_OK;
    case DL_OPT_BATCH:
        if (parse_long("batch", v, 1, 1 << 24, &l, err))
            return DL_ERR_SPEC;
        t->batch = (int)l;
        return DL_OK;
    case DL_OPT_LR: return parse_double("lr", v, 0, 1e6, &o->lr, err);
    case DL_OPT_OPTIMIZER:
        if (parse_choice("optimizer", v, dl_optim_names, &k, err))
            return DL_ERR_SPEC;
        o->kind = (enum dl_optim_kind)k;
        return DL_OK;
    case DL_OPT_MOMENTUM: return parse_double("momentum", v, 0, 0.999999, &o->momentum, err);
    case DL_OPT_NESTEROV: o->nesterov = 1; return DL_OK;
    case DL_OPT_WEIGHT_DECAY: return parse_double("weight-decay", v, 0, 1e3, &o->weight_decay, err);
    case DL_OPT_SCHEDULE:
        if (parse_choice("schedule", v, dl_sched_names, &k, err))
            return DL_ERR_SPEC;
        t->sched.kind = (enum dl_sched_kind)k;
        return DL_OK;
    case DL_OPT_WARMUP: return parse_double("warmup-epochs", v, 0, 1e9, &t->sched.warmup_epochs, err);
    case DL_OPT_SEED:
        if (parse_long("seed", v, 0, LONG_MAX, &l, err))
            return DL_ERR_SPEC;
        t->seed = (uint64_t)l;
        return DL_OK;
    case DL_OPT_DATA:
        if (strlen(v) >= sizeof net->data.dir)
            return dl_errorf(err, DL_ERR_SPEC, "--data: path too long");
        snprintf(net->data.dir, sizeof net->data.dir, "%s", v);
        return DL_OK;
    case DL_OPT_DATASET:
        if (parse_choice("dataset", v, dl_dataset_names, &k, err))
            return DL_ERR_SPEC;
        net->data.kind = (enum dl_dataset_kind)k;
        return DL_OK;
    case DL_OPT_LIMIT_TRAIN: return parse_long("limit-train", v, 1, 1L << 40, &net->data.limit_train, err);
    case DL_OPT_LIMIT_TEST: return parse_long("limit-test", v, 1, 1L << 40, &net->data.limit_test, err);
    case DL_OPT_MAX_STEPS: return parse_long("max-steps", v, 1, 1L << 40, &t->max_steps, err);
    }
    return dl_errorf(err, DL_ERR_INTERNAL, "unhandled option %d", code);
}

/* --net NAME without a slash that is not a file: the shipped network
 * NAME(.yaml) installed under $(pkgdatadir)/nets (DLTRAIN_DATADIR overrides). */
static const char *resolve_net(const char *path, char *buf, size_t size)
{
    if (strchr(path, '/') || access(path, F_OK) == 0)
        return path;
    const char *dir = getenv("DLTRAIN_DATADIR");
    if (!dir || !*dir)
        dir = DL_DATADIR;
    const char *ext = strstr(path, ".yaml") ? "" : ".yaml";
    snprintf(buf, size, "%s/nets/%s%s", dir, path, ext);
    return access(buf, R_OK) == 0 ? buf : path;
}

int dl_net_options_load(const struct dl_net_options *o, struct dl_net *net, const char *prog)
{
    struct dl_error err = {0};
    if (!o->net_path) {
        fprintf(stderr, "%s: missing --net FILE (try --help)\n", prog);
        return 2;
    }
    char installed[1200];
    int rc = dl_net_load(resolve_net(o->net_path, installed, sizeof installed), net, &err);
    for (int i = 0; !rc && i < o->n; i++)
        rc = apply(net, o->codes[i], o->values[i], &err);
    if (!rc && net->train.optim.nesterov && (net->train.optim.kind != DL_OPTIM_SGD || net->train.optim.momentum <= 0))
        rc = dl_errorf(&err, DL_ERR_SPEC, "--nesterov needs the sgd optimizer with momentum > 0");
    if (rc) {
        fprintf(stderr, "%s: %s\n", prog, err.msg);
        if (net->doc)
            dl_net_free(net);
        return rc == DL_ERR_SPEC ? 2 : 1;
    }
    dl_threads_set(o->threads);
    return 0;
}

void dl_net_options_help(FILE *f)
{
    fputs("Network and training options (override the network file):\n"
          "  --net FILE            network description (YAML; see dltrain-net(5)) [required];\n"
          "                        a bare NAME such as resnet50 means the installed nets/NAME.yaml\n"
          "  --epochs N            number of epochs\n"
          "  --batch N             mini-batch size (over all processes)\n"
          "  --max-steps N         stop after N steps\n"
          "  --optimizer NAME      sgd, adagrad, rmsprop, adam or adamw\n"
          "  --lr X                base learning rate\n"
          "  --momentum X          momentum (sgd, rmsprop)\n"
          "  --nesterov            Nesterov momentum (sgd)\n"
          "  --weight-decay X      L2 weight decay (decoupled for adamw)\n"
          "  --schedule NAME       constant, step or cosine\n"
          "  --warmup-epochs X     linear learning-rate warm-up\n"
          "  --seed N              seed of every random choice (default 1)\n"
          "  --dataset NAME        fashion-mnist, mnist, idx or synthetic\n"
          "  --data DIR            folder with the dataset's IDX files\n"
          "  --limit-train N       use only the first N training samples\n"
          "  --limit-test N        use only the first N test samples\n"
          "  --threads N           threads for every kernel (default: the available cores,\n"
          "                        shared among this node's ranks when they are not bound)\n"
          "  --kernel OP=NAME      run OP (or a layer name, or all) with kernel NAME, e.g.\n"
          "                        conv=onednn, fc=openblas, all=reference (repeatable)\n"
          "  --no-fusion           run every ReLU as its own layer (by default a ReLU is folded\n"
          "                        into the convolution or batch norm before it or the max\n"
          "                        pooling after it when their kernels can apply it)\n"
          "  --tune                pick each layer's kernel and micro-batch split by measuring\n"
          "                        (cached in the tuning database; see dltrain tune)\n"
          "  --workspace-limit BYTES  workspace per layer and direction for the tuner (e.g. 64M)\n"
          "  --workspace-total BYTES  divide this total workspace over the layers (ILP)\n"
          "  --tune-db FILE        tuning database (default ~/.cache/dltrain/tune.sqlite)\n"
          "  --tune-policy P       micro-batch sizes: undivided, powerOfTwo (default) or all\n"
          "  --help                print this help and exit\n"
          "  --version             print the version and exit\n",
          f);
}

void dl_print_version(const char *prog)
{
    printf("%s (dltrain) %s\n", prog, PACKAGE_VERSION);
}
