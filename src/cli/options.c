/* options.c: the shared network options (see options.h). */
#include "cli/options.h"

#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/device.h"
#include "backends/kernel.h"
#include "core/parse.h"
#include "core/shipped.h"
#include "core/threads.h"
#include "exec/exec.h"
#include "spec/datafile.h"
#include "train/checkpoint.h"
#include "train/checkpoint_dir.h"
#include "train/hf_weights.h"

void dl_net_options_init(struct dl_net_options *o)
{
    memset(o, 0, sizeof *o);
    dl_tune_options_default(&o->tune);
}

void dl_net_exec_options(struct dl_net_options *o, struct dl_exec_options *out)
{
    *out = (struct dl_exec_options){.kernels = &o->kernels, .device = o->device,
                                    .recompute = (enum dl_recompute)o->recompute};
    o->tune_defaults.options = &o->tune;
    if (o->tune_on)
        out->tuner = (struct dl_exec_tuner){dl_tune_exec_plan, &o->tune};
    else
        out->tuner = (struct dl_exec_tuner){dl_tune_exec_defaults, &o->tune_defaults};
}

/* The options that stand for a key of the network file: given, they are
 * that key set from the command line (spec/netfile.h's struct dl_net_set),
 * read and checked by the schema as the file's own. */
static const struct option_key {
    int code;
    const char *key;
    int string;          /* the value is a name or path, never read as YAML */
    const char *fixed;   /* an option without a value: the value it sets */
} option_keys[] = {
    {DL_OPT_EPOCHS, "train.epochs", 0, NULL},
    {DL_OPT_BATCH, "train.batch", 0, NULL},
    {DL_OPT_MAX_STEPS, "train.max_steps", 0, NULL},
    {DL_OPT_SEED, "train.seed", 0, NULL},
    {DL_OPT_DEVICE, "train.device", 1, NULL},
    {DL_OPT_PRECISION, "train.precision", 1, NULL},
    {DL_OPT_OPTIMIZER, "train.optimizer.type", 1, NULL},
    {DL_OPT_LR, "train.optimizer.lr", 0, NULL},
    {DL_OPT_LR_SCALING, "train.lr_scaling", 1, NULL},
    {DL_OPT_REFERENCE_BATCH, "train.reference_batch", 0, NULL},
    {DL_OPT_MOMENTUM, "train.optimizer.momentum", 0, NULL},
    {DL_OPT_NESTEROV, "train.optimizer.nesterov", 0, "true"},
    {DL_OPT_WEIGHT_DECAY, "train.optimizer.weight_decay", 0, NULL},
    {DL_OPT_CLIP_GRAD_NORM, "train.clip_grad_norm", 0, NULL},
    {DL_OPT_SCHEDULE, "train.schedule.type", 1, NULL},
    {DL_OPT_WARMUP, "train.schedule.warmup_epochs", 0, NULL},
    {DL_OPT_DATASET, "data.dataset", 1, NULL},
    {DL_OPT_DATA, "data.dir", 1, NULL},
    {DL_OPT_DATA_THREADS, "data.threads", 0, NULL},
    {DL_OPT_BAD_SAMPLES, "data.bad_samples", 1, NULL},
    {DL_OPT_LIMIT_TRAIN, "data.limit_train", 0, NULL},
    {DL_OPT_LIMIT_TEST, "data.limit_test", 0, NULL},
    {DL_OPT_DOCUMENT_MASK, "data.document_mask", 0, NULL},
    {DL_OPT_CONTEXT, "args.context", 0, NULL},
    {DL_OPT_SEQUENCE_PARALLEL, "parallel.sequence_parallel", 0, "true"},
    {DL_OPT_ZERO, "parallel.zero", 0, NULL},
    {DL_OPT_RECOMPUTE, "parallel.recompute", 1, NULL},
};

static const struct option_key *option_key(int code)
{
    for (size_t i = 0; i < sizeof option_keys / sizeof *option_keys; i++)
        if (option_keys[i].code == code)
            return &option_keys[i];
    return NULL;
}

/* The long name of option code (for labels). */
static const char *option_name(int code)
{
    static const struct option opts[] = {DL_NET_OPTIONS, {0, 0, 0, 0}};
    for (int i = 0; opts[i].name; i++)
        if (opts[i].val == code)
            return opts[i].name;
    return "?";
}

/* --tune and the tuner's settings (see options.h). */
static int tune_option(struct dl_net_options *o, int opt, const char *arg, const char *prog)
{
    size_t bytes;
    struct dl_error err = {0};
    switch (opt) {
    case DL_OPT_TUNE:
        o->tune_on = 1;
        return 1;
    case DL_OPT_WORKSPACE_LIMIT:
    case DL_OPT_WORKSPACE_TOTAL:
        if (dl_option_refused(prog, dl_parse_bytes(opt == DL_OPT_WORKSPACE_LIMIT ? "--workspace-limit"
                                                                                  : "--workspace-total",
                                                   arg, 0, (size_t)1 << 60, &bytes, &err), &err))
            return -1;
        *(opt == DL_OPT_WORKSPACE_LIMIT ? &o->tune.workspace_limit : &o->tune.workspace_total) = bytes;
        return 1;
    case DL_OPT_TUNE_DB: o->tune.db_path = arg; return 1;
    case DL_OPT_TUNE_POLICY:
        for (int i = 0; dl_tune_policy_names[i]; i++)
            if (strcmp(arg, dl_tune_policy_names[i]) == 0) {
                o->tune.policy = (enum dl_tune_policy)i;
                return 1;
            }
        fprintf(stderr, "%s: --tune-policy: expected undivided, powerOfTwo or all, found '%s'\n", prog,
                dl_short(arg).s);
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
        struct dl_error err = {0};
        return dl_option_refused(prog, dl_parse_int("--threads", arg, 1, 4096, &o->threads, &err), &err) ? -1 : 1;
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
    if (!option_key(opt) && opt != DL_OPT_SET)
        return 0;
    if (o->n == DL_NET_MAX_SETS) {
        fprintf(stderr, "%s: more than %d --set and training options\n", prog, DL_NET_MAX_SETS);
        return -1;
    }
    o->codes[o->n] = opt;
    o->values[o->n++] = arg;
    return 1;
}

const char *dl_shipped_file(const char *path, const char *folder, char *buf, size_t size, char *looked,
                            size_t looked_size)
{
    if (looked && looked_size)
        looked[0] = '\0';
    if (strchr(path, '/') || access(path, F_OK) == 0)
        return path;
    size_t len = strlen(path);
    char rel[1024];
    snprintf(rel, sizeof rel, "%s/%s%s", folder, path, len > 5 && strcmp(path + len - 5, ".yaml") == 0 ? "" : ".yaml");
    return dl_shipped_find(rel, buf, size, looked, looked_size) ? buf : path;
}

/* Every --kernel choice names all, an op kind, or a layer of this network
 * whose op the kernel serves (dl_kernel_choice_add could only check the
 * first two: layer names are known once the network is loaded). */
/* Under a precision other than f32, a --kernel choice that puts a kernel
 * of another dtype on a layer of autocast's list (fc, conv: those that
 * compute in that precision whatever their inputs) which a kernel of the
 * precision could run is refused, naming the layer, the kernel and the one
 * that has the precision.  Other layers follow their inputs' dtype, so a
 * choice there only keeps them in f32. */
static int check_precision_choices(const struct dl_graph *g, const struct dl_kernel_choices *ch, struct dl_error *err)
{
    struct dl_kernel_choices plain = *ch;
    plain.n = 0;
    for (int i = 0; ch->precision != DL_F32 && i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        if (!l->kind->autocast_bf16)
            continue;
        const struct dl_kernel *chosen = dl_kernel_select(l, ch), *own = dl_kernel_select(l, &plain);
        if (!chosen || !own || chosen->dtype == ch->precision || own->dtype != ch->precision)
            continue; /* no kernel of the device (refused with the device) */
        for (int c = ch->n - 1; c >= 0; c--)
            if (dl_kernel_find(l->kind, ch->name[c]) == chosen &&
                (!strcmp(ch->key[c], "all") || !strcmp(ch->key[c], l->kind->name) || !strcmp(ch->key[c], l->name)))
                return dl_errorf(err, DL_ERR_SPEC, "--kernel %s=%s: layer '%s' (%s) computes in %s under --precision "
                                 "%s, and kernel '%s' has no %s version (%s: %s)", ch->key[c], ch->name[c], l->name,
                                 l->kind->name, dl_dtype_name(ch->precision), dl_dtype_name(ch->precision),
                                 chosen->name, dl_dtype_name(ch->precision), dl_dtype_name(ch->precision),
                                 own->name);
    }
    return DL_OK;
}

static int check_kernel_choices(const struct dl_graph *g, const struct dl_kernel_choices *ch, struct dl_error *err)
{
    for (int c = 0; c < ch->n; c++) {
        if (strcmp(ch->key[c], "all") == 0 || dl_op_find(ch->key[c]))
            continue;
        int i = 0;
        while (i < g->n && strcmp(g->layers[i].name, ch->key[c]) != 0)
            i++;
        if (i == g->n)
            return dl_errorf(err, DL_ERR_SPEC, "--kernel %s=%s: '%s' is neither an op kind nor a layer of this "
                             "network", ch->key[c], ch->name[c], ch->key[c]);
        if (!dl_kernel_find(g->layers[i].kind, ch->name[c]))
            return dl_errorf(err, DL_ERR_SPEC, "--kernel %s=%s: kernel '%s' cannot run layer '%s' (%s)", ch->key[c],
                             ch->name[c], ch->name[c], ch->key[c], g->layers[i].kind->name);
    }
    return check_precision_choices(g, ch, err);
}

struct warning_sink {
    const char *prog;
};

static void print_warning(void *ctx, const char *msg)
{
    const struct warning_sink *w = ctx;
    fprintf(stderr, "%s: warning: %s\n", w->prog, msg);
}

/* The device of train.device (after --device) for this node's rank: a
 * build without CUDA, no driver or no GPU is refused here, before any data
 * is read (DL_ERR_SPEC). */
static int open_device(const struct dl_net *net, const struct dl_device **out, struct dl_error *err)
{
    return dl_device_open(net->train.device, dl_threads_local_rank(), out, err);
}

int dl_net_options_load(struct dl_net_options *o, struct dl_net *net, const char *prog)
{
    struct dl_error err = {0};
    if (!o->net_path) {
        fprintf(stderr, "%s: missing --net FILE (try --help)\n", prog);
        return 2;
    }
    if (o->tune_on && o->tune.db_path && strcmp(o->tune.db_path, "none") == 0) {
        fprintf(stderr, "%s: --tune with --tune-db none (the built-in kernel table): measuring needs a database "
                        "file\n", prog);
        return 2;
    }
    char looked[4200];
    const char *path = dl_shipped_file(o->net_path, "nets", o->net_found, sizeof o->net_found, looked, sizeof looked);
    if (*looked) {
        struct dl_short shown = dl_short(o->net_path);
        fprintf(stderr, "%s: --net %s: no such file here, and no shipped network %s%s in %s\n", prog, shown.s, shown.s,
                strstr(o->net_path, ".yaml") ? "" : ".yaml", looked);
        return 2;
    }
    if (access(path, F_OK) != 0) {
        fprintf(stderr, "%s: --net %s: no such file\n", prog, dl_short(o->net_path).s);
        return 2;
    }
    o->net_path = path;
    /* --set and the options standing for keys, in command-line order */
    struct dl_net_set sets[DL_NET_MAX_SETS];
    char (*text)[1200] = calloc(DL_NET_MAX_SETS, sizeof *text);
    int rc = text ? DL_OK : dl_errorf(&err, DL_ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < o->n; i++) {
        const struct option_key *k = option_key(o->codes[i]);
        if (!k) {
            rc = dl_net_set_parse(o->values[i], &sets[i], text[i], sizeof text[i], &err);
            continue;
        }
        const char *v = k->fixed ? k->fixed : o->values[i];
        snprintf(text[i], sizeof text[i], "--%s%s%s", option_name(k->code), k->fixed ? "" : " ",
                 k->fixed ? "" : dl_short(v).s);
        sets[i] = (struct dl_net_set){.key = k->key, .value = v, .label = text[i], .string = k->string};
    }
    if (!rc)
        rc = dl_net_load_with(path, sets, o->n, net, &err);
    free(text);
    struct warning_sink sink = {prog};
    if (!rc)
        rc = dl_net_check_unused_keys(net, print_warning, &sink, &err);
    o->kernels.precision = !rc ? dl_train_precision(&net->train) : DL_F32; /* for executors made outside dl_train */
    o->recompute = rc ? 0 : net->parallel.recompute; /* the same, for executors made outside dl_train */
    if (!rc)
        rc = check_kernel_choices(&net->graph, &o->kernels, &err);
    if (!rc)
        rc = open_device(net, &o->device, &err);
    if (rc) {
        fprintf(stderr, "%s: %s\n", prog, err.msg);
        if (net->doc)
            dl_net_free(net);
        return rc == DL_ERR_SPEC ? 2 : 1;
    }
    dl_threads_set(o->threads);
    return o->precision_later ? 0 : dl_net_precision_resolve(o, net, NULL, prog);
}

int dl_net_precision_resolve(struct dl_net_options *o, struct dl_net *net, struct dl_comm *comm, const char *prog)
{
    int was = net->train.precision, ranks = comm ? comm->size : 1;
    if (was != DL_PRECISION_AUTO && (was != DL_BF16 || !o->precision_later))
        return 0; /* bf16 on a CPU without it: measured for the warning of a training run only */
    struct dl_exec_options eo;
    dl_net_exec_options(o, &eo);
    enum dl_dtype chosen;
    struct dl_error err = {0};
    int rc = dl_precision_resolve(was, &net->graph, net->train.batch / ranks, &eo, comm, &chosen, &o->precision_probe,
                                  &err);
    if (rc) {
        fprintf(stderr, "%s: %s\n", prog, err.msg);
        return rc == DL_ERR_SPEC ? 2 : 1;
    }
    net->train.precision = (int)chosen;
    o->kernels.precision = chosen;
    o->precision_auto = was == DL_PRECISION_AUTO;
    if (!o->precision_auto && dl_precision_slow(&o->precision_probe) && (!comm || comm->rank == 0)) {
        char line[512];
        dl_precision_describe(&o->precision_probe, 0, line, sizeof line);
        fprintf(stderr, "%s: warning: %s\n", prog, line);
    }
    return 0;
}

void dl_net_options_help(FILE *f)
{
    fputs("Network and training options (override the network file):\n"
          "  --net FILE            network description (YAML; see dltrain-net(5)) [required];\n"
          "                        a bare NAME or NAME.yaml such as resnet50 means the shipped\n"
          "                        nets/NAME.yaml (installed, or in the current folder)\n"
          "  --set KEY=VALUE       set any key of the network file, checked as in the file, e.g.\n"
          "                        train.optimizer.beta2=0.95, data.prefetch=4,\n"
          "                        loss.label_smoothing=0.1, layers.fc1.units=256 (a layer by name\n"
          "                        or index); repeatable, applied in order before the options below\n"
          "  --epochs N            number of epochs\n"
          "  --batch N             mini-batch size (over all processes)\n"
          "  --max-steps N         stop after N steps\n"
          "  --optimizer NAME      sgd, adagrad, rmsprop, adam, adamw, lars, lamb or muon (lars and\n"
          "                        lamb: each parameter tensor's step scaled by a trust ratio of\n"
          "                        its norms, the tensors no_decay leaves out unscaled; muon: the\n"
          "                        hidden layers' weight matrices take orthogonalised momentum,\n"
          "                        the other tensors AdamW's step)\n"
          "  --lr X                base learning rate\n"
          "  --lr-scaling linear|sqrt  the base rate scaled from --reference-batch's to --batch's:\n"
          "                        x batch/reference (linear) or x sqrt(batch/reference)\n"
          "                        (train.lr_scaling; none, the default, leaves it)\n"
          "  --reference-batch N   the batch that --lr was chosen for (train.reference_batch)\n"
          "  --momentum X          momentum (sgd, rmsprop, lars; muon: default 0.95)\n"
          "  --nesterov            Nesterov momentum (sgd; muon: on unless the file says false)\n"
          "  --weight-decay X      L2 weight decay (decoupled for adamw)\n"
          "  --clip-grad-norm X    scale the gradient down to L2 norm X when above it, over the whole\n"
          "                        model (PyTorch's clip_grad_norm_; the norm goes to --metrics)\n"
          "  --schedule NAME       constant, step, cosine or wsd (warm-up, stable, decay)\n"
          "  --warmup-epochs X     linear learning-rate warm-up\n",
          f);
    fputs("  --seed N              seed of every random choice (default 1)\n"
          "  --dataset NAME        a dataset file datasets/NAME.yaml (fashion-mnist, mnist,\n"
          "                        cifar10, cifar100, imagenet, imagefolder; see dltrain-data(5)),\n"
          "                        a path to one, or a format: idx, synthetic, npy or csv\n"
          "  --data DIR            the dataset's folder (IDX files, CIFAR binaries, or an image\n"
          "                        folder with train/ and val/ holding a subfolder per class)\n"
          "  --data-threads N      threads decoding images ahead of the step (default 2)\n"
          "  --bad-samples skip|fail  an unreadable image is replaced by the next readable one\n"
          "                        with a warning (skip, the default) or stops the run (fail)\n"
          "  --limit-train N       use only the first N training samples\n"
          "  --limit-test N        use only the first N test samples\n"
          "  --precision P         fp32 (the default) or bf16: layers on PyTorch autocast's bf16\n"
          "                        list (fc, conv) compute in bf16 from fp32 master weights, their\n"
          "                        activations stored in bf16; the others in fp32 (train.precision);\n"
          "                        auto: the one whose step this machine runs faster, measured\n"
          "  --context T           the training window of a sequence network: its args.context\n"
          "                        (nets/gpt2.yaml: up to its 1024 positions)\n",
          f);
    fputs("  --sequence-parallel   with tensor parallelism, the layers that treat positions\n"
          "                        independently (layer norm, residual adds) run on the tensor\n"
          "                        rank's share of the positions (parallel.sequence_parallel)\n"
          "  --zero 0|1|2|3        1: ZeRO stage 1 (sync): the optimizer's state cut over the\n"
          "                        data-parallel ranks; gradients reduce-scattered, each rank\n"
          "                        updates its block, the weights allgathered; 2: the gradients\n"
          "                        too, each bucket summed into its owners as backward ends it\n"
          "                        (no pipeline); 3: the weights too, each layer's gathered from\n"
          "                        their owners before it runs and freed after (parallel.zero)\n"
          "  --recompute none|selective|full  activation recomputation: full keeps only each\n"
          "                        block's input (a `block:` of the network file) and runs its\n"
          "                        layers forward again in backward; selective is what every\n"
          "                        attention kernel does anyway (nothing T x T kept); none the\n"
          "                        default (parallel.recompute)\n"
          "  --device cpu|cuda|emulated  where the network runs (default cpu; cuda: one GPU\n"
          "                        per rank by local rank, never yet run on a GPU: see the\n"
          "                        README; emulated: a testing aid, CPU kernels on memory\n"
          "                        the host reaches only through device copies)\n",
          f);
    fputs("  --document-mask ID    packed documents (text or tokens): token ID ends each document\n"
          "                        (50256 for GPT-2's <|endoftext|>); attention stays within a\n"
          "                        document, positions restart at each, the label after ID is\n"
          "                        ignored (data.document_mask; dltrain-net(5))\n"
          "  --threads N           threads for every kernel (default: the available cores,\n"
          "                        shared among this node's ranks when they are not bound)\n"
          "  --kernel OP=NAME      run OP (or a layer name, or all) with kernel NAME, e.g.\n"
          "                        conv=onednn, fc=openblas, all=reference (repeatable)\n"
          "  --no-fusion           run every ReLU as its own layer (by default a ReLU is folded\n"
          "                        into the convolution or batch norm before it or the max\n"
          "                        pooling after it when their kernels can apply it)\n"
          "  --tune                pick each layer's kernel and micro-batch split by measuring\n"
          "                        (cached in the tuning database; see dltrain tune)\n"
          "  --workspace-limit SIZE  workspace per layer and direction for the tuner (e.g. 64M,\n"
          "                        1GiB; K, M, G, T are powers of 1024, KB, MB, GB, TB of 1000)\n"
          "  --workspace-total SIZE  divide this total workspace over the layers (ILP)\n"
          "  --tune-db FILE        tuning database (default ~/.cache/dltrain/tune.sqlite);\n"
          "                        without --tune, a layer it holds measured on this CPU runs\n"
          "                        the kernel it timed fastest; none: the built-in table\n"
          "  --tune-policy P       micro-batch sizes: undivided, powerOfTwo (default) or all\n"
          "  --help                print this help and exit\n"
          "  --version             print the version and exit\n",
          f);
}

void dl_precision_summary(const struct dl_net *net, const struct dl_kernel *const *kernel, char *buf, size_t size)
{
    const struct dl_graph *g = &net->graph;
    struct dl_kernel_choices defaults = {.precision = dl_train_precision(&net->train)};
    const char *seen[8];
    int count[8] = {0}, n_seen = 0, total = 0, slow = 0;
    for (int i = 0; i < g->n; i++) {
        if (!kernel && !g->layers[i].kind->autocast_bf16) /* the others follow their inputs: known to the executor */
            continue;
        const struct dl_kernel *k = kernel ? kernel[i] : dl_kernel_select(&g->layers[i], &defaults);
        if (!k || k->dtype == DL_F32)
            continue;
        total++;
        int s = 0;
        while (s < n_seen && strcmp(seen[s], k->name) != 0)
            s++;
        if (s == n_seen && n_seen < 8)
            seen[n_seen++] = k->name;
        if (s < 8)
            count[s]++;
        slow |= k->op == NULL; /* reference-bf16: any op, through its reference code */
    }
    int len = snprintf(buf, size, "precision %s: %d of %d layers%s compute in bf16", dl_train_precision_names[net->train.precision],
                       total, g->n, kernel ? "" : " (the fc and convolution ones)");
    for (int s = 0; s < n_seen && len > 0 && (size_t)len < size; s++)
        len += snprintf(buf + len, size - (size_t)len, "%s%d %s", s ? ", " : " (", count[s], seen[s]);
    if (len > 0 && (size_t)len < size)
        snprintf(buf + len, size - (size_t)len, "%s from fp32 master weights, the others in fp32%s",
                 !n_seen ? "" : slow ? ": reference-bf16 is the ops' code at bf16's rounding points, slow)" : ")",
                 kernel ? "" : " or in bf16 where all their inputs are");
}

int dl_option_refused(const char *prog, int rc, const struct dl_error *err)
{
    if (rc)
        fprintf(stderr, "%s: %s\n", prog, err->msg);
    return rc != 0;
}


/* Levenshtein distance of a and b (at most 63 characters of each). */
static int edit_distance(const char *a, const char *b)
{
    int n = (int)strlen(a), m = (int)strlen(b);
    n = n > 63 ? 63 : n, m = m > 63 ? 63 : m;
    int d[64][64];
    for (int i = 0; i <= n; i++)
        d[i][0] = i;
    for (int j = 0; j <= m; j++)
        d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]), del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[n][m];
}

const char *dl_closest_name(const char *word, const char *const *names)
{
    const char *best = NULL;
    int best_d = 1 << 30, len = (int)strlen(word);
    for (int i = 0; names[i]; i++) {
        int d = edit_distance(word, names[i]);
        if (d < best_d)
            best = names[i], best_d = d;
    }
    return best && (best_d <= 2 || best_d <= len / 3) ? best : NULL;
}

int dl_load_weights(const char *checkpoint, const char *init_from, struct dl_exec *e, const struct dl_graph *g,
                    struct dl_error *err)
{
    if (init_from)
        return dl_hf_import(init_from, g, e, err);
    char file[4200];
    struct stat st;
    const char *path = checkpoint;
    if (stat(path, &st) != 0)
        return dl_errorf(err, DL_ERR_IO, "--checkpoint %s: no such file or folder", path);
    if (S_ISDIR(st.st_mode)) {
        int found = 0, rc = dl_checkpoint_find_latest(path, file, sizeof file, &found, NULL, 0, err);
        if (rc)
            return rc;
        if (!found)
            return dl_errorf(err, DL_ERR_IO, "--checkpoint %s: no checkpoint in the folder", path);
        path = file;
    }
    struct dl_run_view v = {g, e, NULL};
    struct dl_checkpoint_meta meta;
    return dl_checkpoint_load(path, &v, &meta, err);
}
