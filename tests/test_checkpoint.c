/* test_checkpoint.c: checkpoints of a real small network (conv, batch norm,
 * dropout, fc; Adam): a resumed run continues bit for bit; the safetensors
 * reader rejects every kind of damaged file with a message naming what is
 * wrong; full disks and unwritable folders keep the previous checkpoint;
 * folder discovery, rotation, schedules, signal flags and NaN location. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "spec/netfile.h"
#include "train/checkpoint.h"
#include "train/checkpoint_dir.h"
#include "train/numerics.h"
#include "train/signals.h"

#define BATCH 4

static const char *const NET =
    "input: {shape: [2, 5, 5], classes: 3}\n"
    "layers:\n"
    "  - {name: conv1, type: conv, filters: 4, kernel: 3, pad: 1}\n"
    "  - {name: bn1, type: batchnorm}\n"
    "  - {type: relu}\n"
    "  - {name: drop, type: dropout, rate: 0.3}\n"
    "  - {name: fc, type: fc, units: 3}\n"
    "loss: softmax_cross_entropy\n"
    "train: {optimizer: {type: adam, lr: 0.01}}\n";

struct run {
    struct dl_net net;
    struct dl_exec e;
    struct dl_optim o;
    struct dl_run_view v;
};

static char tmpdir[256];

static void run_open(struct run *r, const char *text, uint64_t seed)
{
    struct dl_error err = {0};
    memset(r, 0, sizeof *r);
    assert_int_equal(dl_net_load_string("test.yaml", text, &r->net, &err), 0);
    assert_int_equal(dl_exec_init(&r->e, &r->net.graph, BATCH, seed, NULL, &err), 0);
    assert_int_equal(dl_optim_init(&r->o, &r->net.train.optim, r->e.n_weights, &err), 0);
    r->v = (struct dl_run_view){&r->net.graph, &r->e, &r->o};
}

static void run_close(struct run *r)
{
    dl_optim_free(&r->o);
    dl_exec_free(&r->e);
    dl_net_free(&r->net);
}

/* One training step on batch number k (inputs and labels derived from k). */
static double step(struct run *r, int k)
{
    static dl_real x[BATCH * 50];
    int y[BATCH];
    struct dl_rng g;
    dl_rng_seed(&g, 1000 + (uint64_t)k);
    for (int i = 0; i < BATCH * 50; i++)
        x[i] = (dl_real)(2 * dl_rng_uniform(&g) - 1);
    for (int i = 0; i < BATCH; i++)
        y[i] = (int)dl_rng_below(&g, 3);
    dl_exec_zero_grad(&r->e);
    dl_exec_forward(&r->e, x, y, BATCH, 1);
    double loss = dl_exec_loss_sum(&r->e);
    dl_exec_backward(&r->e);
    dl_optim_step(&r->o, 0.01, r->e.weights, r->e.dweights);
    return loss;
}

static void path_in_tmp(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
}

static int setup(void **state)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/dltrain-ckpt-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd);
}

/* ---------------------------------------------------------------- round trip */

static void resume_is_bit_identical(void **state)
{
    struct run a, b;
    struct dl_error err = {0};
    char path[512];
    path_in_tmp(path, sizeof path, "resume.safetensors");
    run_open(&a, NET, 7);
    for (int k = 0; k < 3; k++)
        step(&a, k);
    struct dl_checkpoint_meta m = {.global_step = 3, .epoch = 1, .step = 2, .seed = UINT64_MAX - 5,
                                   .epoch_loss_sum = 1.0 / 3.0, .epoch_seen = 8, .epoch_correct = 5,
                                   .net_crc32 = 0xdeadbeef, .world_size = 4, .dp = 4, .tp = 1, .pp = 1};
    assert_int_equal(dl_checkpoint_save(path, &a.v, &m, &err), 0);
    double want[3];
    for (int k = 3; k < 6; k++)
        want[k - 3] = step(&a, k);

    run_open(&b, NET, 12345); /* other initial weights and dropout streams */
    struct dl_checkpoint_meta got;
    assert_int_equal(dl_checkpoint_load(path, &b.v, &got, &err), 0);
    assert_int_equal(got.global_step, 3);
    assert_int_equal(got.epoch, 1);
    assert_int_equal(got.step, 2);
    assert_true(got.seed == UINT64_MAX - 5);
    assert_true(got.epoch_loss_sum == 1.0 / 3.0);
    assert_int_equal(got.epoch_seen, 8);
    assert_int_equal(got.epoch_correct, 5);
    assert_int_equal(got.net_crc32, 0xdeadbeef);
    assert_int_equal(got.world_size, 4);
    assert_string_equal(got.optimizer, "adam");
    assert_int_equal(got.optimizer_step, 3);
    assert_int_equal(b.o.t, 3);
    for (int k = 3; k < 6; k++) {
        double loss = step(&b, k);
        assert_memory_equal(&loss, &want[k - 3], sizeof loss); /* bit for bit */
    }
    assert_memory_equal(a.e.weights, b.e.weights, sizeof(dl_real) * (size_t)a.e.n_weights);
    assert_memory_equal(a.e.state, b.e.state, sizeof(dl_real) * (size_t)a.e.n_state);
    run_close(&a);
    run_close(&b);
}

static void names_shapes_and_metadata(void **state)
{
    struct run a;
    struct dl_error err = {0};
    char path[512];
    path_in_tmp(path, sizeof path, "names.safetensors");
    run_open(&a, NET, 3);
    step(&a, 0);
    struct dl_checkpoint_meta m = {.global_step = 1, .seed = 3};
    assert_int_equal(dl_checkpoint_save(path, &a.v, &m, &err), 0);
    struct dl_st_file f;
    assert_int_equal(dl_st_open(path, &f, &err), 0);
    assert_true(f.has_checksum);
    const struct dl_st_entry *w = dl_st_find(&f, "conv1.weight");
    assert_non_null(w);
    assert_int_equal(w->dtype, DL_ST_F32);
    assert_int_equal(w->ndim, 4);
    int64_t want[4] = {4, 2, 3, 3};
    assert_memory_equal(w->shape, want, sizeof want);
    assert_memory_equal(w->data, a.e.weights, 72 * sizeof(float));
    assert_non_null(dl_st_find(&f, "bn1.running_mean"));
    assert_non_null(dl_st_find(&f, "bn1.running_var"));
    assert_non_null(dl_st_find(&f, "fc.bias"));
    assert_non_null(dl_st_find(&f, "optim.fc.weight.exp_avg"));
    assert_non_null(dl_st_find(&f, "optim.conv1.bias.exp_avg_sq"));
    assert_null(dl_st_find(&f, "optim.bn1.running_mean.exp_avg")); /* state has no optimizer slots */
    const struct dl_st_entry *r = dl_st_find(&f, "rng.layers");
    assert_non_null(r);
    assert_int_equal(r->dtype, DL_ST_U64);
    assert_int_equal(r->shape[0], a.net.graph.n);
    assert_string_equal(dl_st_meta_get(&f, "format"), DL_CHECKPOINT_FORMAT);
    assert_string_equal(dl_st_meta_get(&f, "step"), "1");
    assert_true((8 + (size_t)(f.data - f.bytes - 8)) % 8 == 0); /* data 8-byte aligned */
    dl_st_close(&f);
    run_close(&a);
}

/* A different network or optimizer is refused before anything is touched. */
static void refuses_other_network_and_optimizer(void **state)
{
    struct run a, b, c;
    struct dl_error err = {0};
    char path[512];
    path_in_tmp(path, sizeof path, "other.safetensors");
    run_open(&a, NET, 1);
    struct dl_checkpoint_meta m = {0};
    assert_int_equal(dl_checkpoint_save(path, &a.v, &m, &err), 0);

    char other[1024];
    snprintf(other, sizeof other, "%s", NET);
    memcpy(strstr(other, "filters: 4"), "filters: 5", 10);
    run_open(&b, other, 2);
    dl_real before = b.e.weights[0];
    struct dl_checkpoint_meta got;
    assert_int_equal(dl_checkpoint_load(path, &b.v, &got, &err), DL_ERR_SPEC);
    assert_non_null(strstr(err.msg, "tensor 'conv1.weight': expected shape [5, 2, 3, 3], found [4, 2, 3, 3]"));
    assert_true(b.e.weights[0] == before);

    snprintf(other, sizeof other, "%s", NET);
    memcpy(strstr(other, "type: adam"), "type: sgd ", 10);
    run_open(&c, other, 2);
    assert_int_equal(dl_checkpoint_load(path, &c.v, &got, &err), DL_ERR_SPEC);
    assert_non_null(strstr(err.msg, "optimizer state is for 'adam', this run uses 'sgd'"));
    /* weights only (evaluation): no optimizer, optim.* tensors ignored */
    c.v.optim = NULL;
    assert_int_equal(dl_checkpoint_load(path, &c.v, &got, &err), 0);
    assert_memory_equal(a.e.weights, c.e.weights, sizeof(dl_real) * (size_t)a.e.n_weights);
    run_close(&a);
    run_close(&b);
    run_close(&c);
}

/* ---------------------------------------------------------------- hostile files */

/* Builds length + header + data in buf; returns the size. */
static size_t make_file(unsigned char *buf, const char *header, size_t data_bytes)
{
    uint64_t n = strlen(header);
    for (int b = 0; b < 8; b++)
        buf[b] = (unsigned char)(n >> (8 * b));
    memcpy(buf + 8, header, n);
    for (size_t i = 0; i < data_bytes; i++)
        buf[8 + n + i] = (unsigned char)i;
    return 8 + n + data_bytes;
}

static void expect_reject(const unsigned char *buf, size_t size, const char *want)
{
    struct dl_st_file f;
    struct dl_error err = {0};
    int rc = dl_st_open_memory("bad.safetensors", buf, size, &f, &err);
    if (rc != DL_ERR_DATA || !strstr(err.msg, want) || !strstr(err.msg, "bad.safetensors"))
        fail_msg("expected an error containing '%s', got %d: %s", want, rc, err.msg);
}

static void reader_rejects_damaged_files(void **state)
{
    static unsigned char buf[4096];
    const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                     "\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[16,19]}}";
    size_t n = make_file(buf, ok, 19);
    struct dl_st_file f;
    struct dl_error err = {0};
    assert_int_equal(dl_st_open_memory("good", buf, n, &f, &err), 0);
    assert_int_equal(f.n, 2);
    assert_int_equal(f.has_checksum, 0);
    dl_st_close(&f);

    expect_reject(buf, 5, "truncated: 5 bytes, expected at least 8");
    expect_reject(buf, n - 1, "tensor 'b': data ends at byte 19 of the data section: outside the 18 bytes the file holds (truncated");
    expect_reject(buf, 40, "header length 111 goes beyond the end of the file (32 bytes");
    /* header, data bytes, expected message */
    static const struct {
        const char *header;
        size_t data;
        const char *want;
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}",
         8, "tensor 'a': data ends at byte 16 of the data section: outside the 8 bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,16]}}",
         16, "tensor 'a': shape and dtype F32 need 24 bytes, data_offsets give 16"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}",
         5, "the tensors cover 2 bytes of data but the file holds 5"},
        {"{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}",
         8, "tensor 'a': unknown dtype 'F33'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
         6, "tensor 'b': data_offsets [2, 6] overlap tensor 'a'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[5,6]}}",
         6, "tensor 'b': data begins at byte 5: expected 4"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
         2, "duplicate object key"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,0]}}",
         1, "end before begin"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}",
         1, "shape[0]: expected a non-negative integer"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,8]}}",
         8, "shape too large"},
        {"{\"__metadata__\":{\"x\":1}}",
         0, "__metadata__ 'x': expected a string value"},
        {"{\"__metadata__\":{\"dltrain.data_crc32\":\"crc32:00000000\"},\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}",
         2, "checksum mismatch: the header says crc32 00000000, the data give"},
        {"[1,2]",
         0, "the header does not start with '{'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":0}}",
         1, "tensor 'a': expected exactly the keys dtype"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}",
         1, "header byte"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_reject(buf, make_file(buf, cases[i].header, cases[i].data), cases[i].want);
}

/* A real checkpoint with one flipped data bit, cut short, or with a header
 * length beyond the file. */
static void loader_rejects_damaged_checkpoints(void **state)
{
    struct run a;
    struct dl_error err = {0};
    char path[512];
    path_in_tmp(path, sizeof path, "damaged.safetensors");
    run_open(&a, NET, 1);
    struct dl_checkpoint_meta m = {0}, got;
    assert_int_equal(dl_checkpoint_save(path, &a.v, &m, &err), 0);
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    assert_true(n > 1000 && n < sizeof buf);
    assert_int_equal(dl_checkpoint_load_memory("ok", buf, n, &a.v, &got, &err), 0);
    buf[n - 100] ^= 0x10;
    assert_int_equal(dl_checkpoint_load_memory("flip", buf, n, &a.v, &got, &err), DL_ERR_DATA);
    assert_non_null(strstr(err.msg, "flip: checksum mismatch"));
    buf[n - 100] ^= 0x10;
    assert_int_equal(dl_checkpoint_load_memory("cut", buf, n - 4, &a.v, &got, &err), DL_ERR_DATA);
    assert_non_null(strstr(err.msg, "outside the"));
    assert_non_null(strstr(err.msg, "(truncated, or a bad offset)"));
    assert_int_equal(dl_checkpoint_load_memory("cut", buf, 100, &a.v, &got, &err), DL_ERR_DATA);
    assert_non_null(strstr(err.msg, "goes beyond the end of the file"));
    /* a plain safetensors file (no dltrain metadata) is refused by name */
    size_t plain = make_file(buf, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
    assert_int_equal(dl_checkpoint_load_memory("plain", buf, plain, &a.v, &got, &err), DL_ERR_DATA);
    assert_non_null(strstr(err.msg, "not a dltrain checkpoint"));
    run_close(&a);
}

/* Metadata values against what they can be: each rule refuses with the key,
 * the value and the range, and a checkpoint a run wrote passes them all. */
static void metadata_is_checked(void **state)
{
    struct dl_error err = {0};
    const struct dl_checkpoint_meta ok = {.global_step = 30, .epoch = 2, .step = 5, .epoch_loss_sum = 12.5,
                                          .epoch_seen = 40, .epoch_correct = 30, .world_size = 8, .dp = 2,
                                          .tp = 2, .pp = 2, .optimizer = "adam", .optimizer_step = 30};
    const struct dl_checkpoint_limits lim = {.steps_per_epoch = 10, .epoch_samples = 80, .positions = 1};
    assert_int_equal(dl_checkpoint_meta_check("c", &ok, &lim, &err), 0);
    assert_int_equal(dl_checkpoint_meta_check("c", &(struct dl_checkpoint_meta){0}, &lim, &err), 0);
    static const struct {
        long field; /* 0 step, 1 epoch, 2 epoch_seen, 3 epoch_correct, 4 dp, 5 pp, 6 optimizer_step, 7 loss */
        long value;
        int with_limits;
        const char *want;
    } cases[] = {
        {0, 31, 0, "c: metadata 'epoch_step': expected 0..30 (at most the run's step), found 31"},
        {0, 11, 1, "c: metadata 'epoch_step': expected 0..10 (the steps of an epoch of this run's data), found 11"},
        {1, 31, 0, "c: metadata 'epoch': expected 0..30 (each epoch took a step), found 31"},
        {2, 81, 1, "c: metadata 'epoch_seen': expected 0..80 (the samples of an epoch of this run's data), found 81"},
        {3, 1000000000000, 1, "c: metadata 'epoch_correct': expected 0..40 (epoch_seen 40 x 1 label per sample), "
                              "found 1000000000000"},
        {4, 9, 0, "c: metadata 'dp': expected 0..8 (at most world_size), found 9"},
        {5, 4, 0, "c: metadata 'dp', 'tp', 'pp': expected a product of at most world_size 8, found 2 x 2 x 4"},
        {6, 3, 0, "c: metadata 'optimizer_step': expected 0..0 (no optimizer was saved), found 3"},
        {7, 0, 0, "c: metadata 'epoch_loss_sum': expected 0 (epoch_seen is 0), found 12.5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct dl_checkpoint_meta m = ok;
        long v = cases[i].value;
        switch (cases[i].field) {
        case 0: m.step = v; break;
        case 1: m.epoch = v; break;
        case 2: m.epoch_seen = v; break;
        case 3: m.epoch_correct = v; break;
        case 4: m.dp = (int)v; break;
        case 5: m.pp = (int)v; break;
        case 6: m.optimizer[0] = 0, m.optimizer_step = v; break;
        default: m.epoch_seen = m.epoch_correct = v; break;
        }
        memset(&err, 0, sizeof err);
        assert_int_equal(dl_checkpoint_meta_check("c", &m, cases[i].with_limits ? &lim : NULL, &err), DL_ERR_DATA);
        assert_string_equal(err.msg, cases[i].want);
        if (cases[i].with_limits) /* a limit of the run only */
            assert_int_equal(dl_checkpoint_meta_check("c", &m, NULL, &err), 0);
    }
}

/* ---------------------------------------------------------------- faults */

static long count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    long n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* RLIMIT_FSIZE makes writes fail like a full disk (EFBIG instead of ENOSPC):
 * the save fails with the reason, and the previous checkpoint stays intact. */
static void full_disk_keeps_previous_checkpoint(void **state)
{
    struct run a;
    struct dl_error err = {0};
    char dir[512], path[600];
    path_in_tmp(dir, sizeof dir, "full");
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    run_open(&a, NET, 1);
    struct dl_checkpoint_meta m = {.global_step = 1}, got;
    assert_int_equal(dl_checkpoint_save(path, &a.v, &m, &err), 0);
    struct rlimit old, tiny;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    tiny = old;
    tiny.rlim_cur = 2000;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &tiny), 0);
    m.global_step = 2;
    int rc = dl_checkpoint_save(path, &a.v, &m, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    assert_int_equal(rc, DL_ERR_IO);
    assert_non_null(strstr(err.msg, "File too large"));
    assert_non_null(strstr(err.msg, "ckpt.safetensors"));
    assert_int_equal(count_entries(dir), 1); /* no temporary file left behind */
    assert_int_equal(dl_checkpoint_load(path, &a.v, &got, &err), 0);
    assert_int_equal(got.global_step, 1);
    run_close(&a);
}

static void unwritable_folder_is_a_clear_error(void **state)
{
    char dir[512], path[600];
    path_in_tmp(dir, sizeof dir, "readonly");
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/x.bin", dir);
    struct dl_error err = {0};
    assert_int_equal(dl_atomic_write_file(path, "old", 3, &err), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* as root, permissions do not apply: become nobody first */
        if (getuid() == 0 && setuid(65534) != 0)
            _exit(3);
        if (getuid() != 0)
            chmod(dir, 0555);
        int rc = dl_atomic_write_file(path, "new", 3, &err);
        _exit(rc == DL_ERR_IO && strstr(err.msg, "Permission denied") && strstr(err.msg, path) ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    chmod(dir, 0755);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    char buf[8] = {0};
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_int_equal(fread(buf, 1, sizeof buf, fp), 3);
    fclose(fp);
    assert_string_equal(buf, "old");
    /* a folder that does not exist */
    assert_int_equal(dl_atomic_write_file("/nonexistent-dir/x", "y", 1, &err), DL_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/x: cannot create a file next to it: No such file"));
}

static void atomic_file_replaces_whole(void **state)
{
    char path[512];
    struct dl_error err = {0};
    path_in_tmp(path, sizeof path, "atomic.txt");
    struct dl_atomic_file a;
    assert_int_equal(dl_atomic_write_file(path, "first", 5, &err), 0);
    assert_int_equal(dl_atomic_open(&a, path, ".partial", &err), 0);
    assert_int_equal(dl_atomic_write(&a, "second", 6, &err), 0);
    assert_int_equal(dl_atomic_flush(&a, &err), 0);
    struct stat st;
    char partial[600];
    snprintf(partial, sizeof partial, "%s.partial", path);
    assert_int_equal(stat(partial, &st), 0);
    assert_int_equal(st.st_size, 6);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 5); /* still the old file */
    dl_atomic_abort(&a);
    assert_int_not_equal(stat(partial, &st), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 5);
    assert_int_equal(dl_atomic_open(&a, path, NULL, &err), 0);
    assert_int_equal(dl_atomic_write(&a, "second", 6, &err), 0);
    assert_int_equal(dl_atomic_commit(&a, &err), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 6);
    assert_int_equal(dl_atomic_commit(&a, &err), DL_ERR_INTERNAL);
    dl_atomic_abort(&a); /* harmless after commit */
}

/* ---------------------------------------------------------------- folders */

static void latest_valid_and_rotation(void **state)
{
    struct run a;
    struct dl_error err = {0};
    char dir[512], path[700], found[700], warn[4096];
    path_in_tmp(dir, sizeof dir, "rot");
    assert_int_equal(mkdir(dir, 0755), 0);
    run_open(&a, NET, 1);
    int have = 1;
    assert_int_equal(dl_checkpoint_find_latest(dir, found, sizeof found, &have, warn, sizeof warn, &err), 0);
    assert_int_equal(have, 0);
    for (long s = 10; s <= 30; s += 10) {
        struct dl_checkpoint_meta m = {.global_step = s};
        assert_int_equal(dl_checkpoint_path(path, sizeof path, dir, s, &err), 0);
        assert_int_equal(dl_checkpoint_save(path, &a.v, &m, &err), 0);
    }
    assert_non_null(strstr(path, "/ckpt-0000000030.safetensors"));
    assert_int_equal(truncate(path, 500), 0); /* the newest is damaged */
    snprintf(path, sizeof path, "%s/ckpt-0000000040.safetensors", dir);
    FILE *fp = fopen(path, "w"); /* an empty one */
    fclose(fp);
    snprintf(path, sizeof path, "%s/ckpt-0000000050.safetensors.tmp.99.0", dir); /* a killed writer's */
    fp = fopen(path, "w");
    fclose(fp);
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    fp = fopen(path, "w");
    fclose(fp);
    assert_int_equal(dl_checkpoint_find_latest(dir, found, sizeof found, &have, warn, sizeof warn, &err), 0);
    assert_int_equal(have, 1);
    assert_non_null(strstr(found, "ckpt-0000000020.safetensors"));
    assert_non_null(strstr(warn, "ckpt-0000000040.safetensors: skipped: "));
    assert_non_null(strstr(warn, "ckpt-0000000030.safetensors: skipped: "));
    assert_null(strstr(warn, ".tmp."));
    struct dl_checkpoint_meta m;
    assert_int_equal(dl_checkpoint_probe(found, &m, &err), 0);
    assert_int_equal(m.global_step, 20);
    int removed;
    assert_int_equal(dl_checkpoint_rotate(dir, 2, &removed, &err), 0);
    assert_int_equal(removed, 3); /* steps 10 and 20, and the temporary file */
    assert_int_equal(count_entries(dir), 3); /* 30, 40, notes.txt */
    assert_int_equal(dl_checkpoint_rotate(dir, 0, &removed, &err), DL_ERR_SPEC);
    assert_int_equal(dl_checkpoint_find_latest("/nonexistent-dir", found, sizeof found, &have, NULL, 0, &err),
                     DL_ERR_IO);
    run_close(&a);
}

static void every_parsing_and_due(void **state)
{
    struct dl_checkpoint_every ev;
    struct dl_error err = {0};
    assert_int_equal(dl_checkpoint_parse_every("500", &ev, &err), 0);
    assert_int_equal(ev.steps, 500);
    assert_true(!dl_checkpoint_due(&ev, 499, 1e9) && dl_checkpoint_due(&ev, 500, 0));
    assert_int_equal(dl_checkpoint_parse_every("15m", &ev, &err), 0);
    assert_true(ev.seconds == 900 && ev.steps == 0);
    assert_true(!dl_checkpoint_due(&ev, 1000000, 899.9) && dl_checkpoint_due(&ev, 0, 900));
    assert_int_equal(dl_checkpoint_parse_every("90s", &ev, &err), 0);
    assert_true(ev.seconds == 90);
    assert_int_equal(dl_checkpoint_parse_every("2h", &ev, &err), 0);
    assert_true(ev.seconds == 7200);
    const char *bad[] = {"", "0", "-5", "1.5", "10x", "s", "0s", "1e30"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(dl_checkpoint_parse_every(bad[i], &ev, &err), DL_ERR_SPEC);
        assert_non_null(strstr(err.msg, "--checkpoint-every"));
    }
}

/* ---------------------------------------------------------------- signals, NaN */

/* Sends sig to the process (as kill(1) or Slurm does) and waits up to 2 s for
 * the signal thread to record something. */
static int send_and_wait(int sig, int want)
{
    kill(getpid(), sig);
    for (int i = 0; i < 200 && dl_signals_pending() != want; i++)
        usleep(10000);
    return dl_signals_pending();
}

static void signals_set_a_flag(void **state)
{
    assert_int_equal(dl_signals_install(), 0);
    assert_int_equal(dl_signals_pending(), 0);
    assert_int_equal(send_and_wait(SIGUSR1, SIGUSR1), SIGUSR1);
    send_and_wait(SIGTERM, -1); /* the first signal is the one reported */
    assert_int_equal(dl_signals_pending(), SIGUSR1);
    dl_signals_clear();
    assert_int_equal(send_and_wait(SIGTERM, SIGTERM), SIGTERM);
    assert_string_equal(dl_signal_name(SIGTERM), "SIGTERM");
    assert_string_equal(dl_signal_name(SIGUSR1), "SIGUSR1");
    dl_signals_uninstall();
    struct sigaction sa;
    sigaction(SIGTERM, NULL, &sa);
    assert_true(sa.sa_handler == SIG_DFL);
    assert_int_equal(DL_EXIT_PREEMPTED, 75);
}

static int chained;
static void chained_hook(void *ctx, int layer)
{
    chained++;
}

static void nan_is_located(void **state)
{
    struct run a;
    struct dl_error err = {0};
    run_open(&a, NET, 1);
    step(&a, 0);
    struct dl_nonfinite nf;
    assert_int_equal(dl_numerics_first_nonfinite_output(&a.e, &nf), 0);
    a.e.hooks.grad_hook = chained_hook;
    struct dl_numerics_watch w;
    dl_numerics_watch_install(&w, &a.e);
    int fc = dl_graph_find(&a.net.graph, "fc");
    assert_true(fc > 0);
    a.e.param[fc][0][5] = (dl_real)INFINITY;
    chained = 0;
    dl_numerics_watch_reset(&w);
    double loss = step(&a, 1);
    assert_true(chained > 0); /* the hook already installed still runs */
    assert_false(isfinite(loss));
    assert_int_equal(w.first.where, DL_NF_WEIGHT_GRAD);
    assert_int_equal(w.first.layer, fc);
    assert_false(dl_numerics_all_finite(a.e.dweights, a.e.n_weights));
    dl_numerics_watch_uninstall(&w);
    assert_true(a.e.hooks.grad_hook == chained_hook);
    run_close(&a);

    /* forward only, in a fresh run (the update above spread NaN into every
     * weight): the fc output is the first non-finite one */
    run_open(&a, NET, 1);
    a.e.param[fc][0][5] = (dl_real)NAN;
    static dl_real x[BATCH * 50];
    int y[BATCH] = {0};
    dl_exec_forward(&a.e, x, y, BATCH, 1);
    assert_int_equal(dl_numerics_first_nonfinite_output(&a.e, &nf), 1);
    assert_int_equal(nf.where, DL_NF_OUTPUT);
    assert_int_equal(nf.layer, fc);
    assert_int_equal(dl_numerics_error(&a.net.graph, 812, NAN, &nf, &err), DL_ERR_DATA);
    assert_non_null(strstr(err.msg, "step 812: the loss is nan; first non-finite value: output of layer 'fc' (fc)"));
    assert_true(dl_numerics_all_finite(a.e.weights, 5));
    /* the weights themselves: the first non-finite parameter, named */
    assert_int_equal(dl_numerics_first_nonfinite_param(&a.e, &nf, &err), 1);
    assert_int_equal(nf.where, DL_NF_PARAM);
    assert_int_equal(nf.layer, fc);
    assert_int_equal(nf.index, 5);
    assert_int_equal(dl_numerics_param_error(&a.net.graph, 7, &nf, &err), DL_ERR_DATA);
    assert_non_null(strstr(err.msg, "after step 7: the weights are no longer finite: parameter 'fc.weight' "
                                    "(layer 'fc', fc), element 5 = nan"));
    a.e.param[fc][0][5] = 0;
    assert_int_equal(dl_numerics_first_nonfinite_param(&a.e, &nf, &err), 0);
    int bn = dl_graph_find(&a.net.graph, "bn1");
    a.e.param[bn][3][1] = (dl_real)-INFINITY; /* running_var: state, not trainable, checked too */
    assert_int_equal(dl_numerics_first_nonfinite_param(&a.e, &nf, &err), 1);
    assert_int_equal(nf.layer, bn);
    assert_int_equal(nf.param, 3);
    assert_int_equal(nf.index, 1);
    run_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resume_is_bit_identical),
        cmocka_unit_test(names_shapes_and_metadata),
        cmocka_unit_test(refuses_other_network_and_optimizer),
        cmocka_unit_test(reader_rejects_damaged_files),
        cmocka_unit_test(loader_rejects_damaged_checkpoints),
        cmocka_unit_test(metadata_is_checked),
        cmocka_unit_test(full_disk_keeps_previous_checkpoint),
        cmocka_unit_test(unwritable_folder_is_a_clear_error),
        cmocka_unit_test(atomic_file_replaces_whole),
        cmocka_unit_test(latest_valid_and_rotation),
        cmocka_unit_test(every_parsing_and_due),
        cmocka_unit_test(signals_set_a_flag),
        cmocka_unit_test(nan_is_located),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
