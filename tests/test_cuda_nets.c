/* test_cuda_nets.c: every layer of every shipped network (the files of
 * nets/, the GPT networks gpt-tiny and gpt2 among them) has a GPU kernel of
 * this build that supports it (but the LLaMA family's layers, moe and the
 * recurrent ones, listed in gpu_kernel_not_yet): kernel choice for an executor on the CUDA
 * device (dl_kernel_select with device DL_DEVICE_CUDA, what the executor
 * asks) finds one, so `--device cuda` can run the network layer by layer.
 * And under `--precision bf16` (the choice's precision bf16): every layer
 * on autocast's list (op.h's autocast_bf16: conv, fc) gets a GPU kernel of
 * dtype bf16, and so does every other layer that reads only bf16 values
 * (exec/steps.c's rule, followed here layer by layer from the network's
 * f32 input) where a bf16 GPU kernel serves its kind (gpt2's attention,
 * after the bf16 projection of q, k and v).
 * A kernel's supports() is plain host code, so this needs no GPU and runs
 * wherever the CUDA build does (tools/test's build-cuda); whether those
 * kernels compute what the host's do is test_kernels_cuda's question,
 * where a GPU is present.  Prints each layer's kernel, or the layers
 * without one.  The mutations of src/backends/cuda/ it catches
 * (cuda_fc_refuses_sequences, cuda_attention_not_registered,
 * cuda_fc_bf16_not_registered) need a --with-cuda build to run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/attention_rows.h"
#include "backends/kernel.h"
#include "config.h"
#include "spec/netfile.h"

#define MAX_NETS 64

/* The layers no GPU kernel serves yet: the LLaMA family's new kinds (RMS
 * norm, rotary positions, SwiGLU), grouped-query attention and the
 * mixture of experts (issues 43 and 44 landed them on the CPU first; the
 * GPU issue brings their kernels).  Such
 * a layer is listed, not counted, and must have no GPU kernel: when one
 * comes, this list must shrink (the test fails until it does). */
static int gpu_kernel_not_yet(const struct dl_layer *l)
{
    static const char *const kinds[] = {"rmsnorm", "rope", "swiglu", "moe", "lstm", "gru", "rnn", NULL};
    for (int i = 0; kinds[i]; i++)
        if (strcmp(l->kind->name, kinds[i]) == 0)
            return 1;
    return strcmp(l->kind->name, "attention") == 0 && !dl_attention_ungrouped(l);
}

static char names[MAX_NETS][256];

/* The layers of nets/NAME.yaml that no CUDA kernel supports (each printed),
 * after printing every layer's kernel. */
static int layers_without_gpu_kernel(const char *name)
{
    char path[1024];
    const char *src = getenv("top_srcdir");
    snprintf(path, sizeof path, "%s/nets/%s", src ? src : ".", name);
    struct dl_net net;
    struct dl_error err = {0};
    int rc = dl_net_load(path, &net, &err);
    if (rc)
        print_message("# %s\n", err.msg);
    assert_int_equal(rc, DL_OK);
    struct dl_kernel_choices on_gpu = {.device = DL_DEVICE_CUDA};
    int missing = 0;
    for (int i = 0; i < net.graph.n; i++) {
        const struct dl_layer *l = &net.graph.layers[i];
        const struct dl_kernel *k = dl_kernel_select(l, &on_gpu);
        char shape[48];
        dl_shape_str(l->in_shape[0], shape, sizeof shape);
        if (gpu_kernel_not_yet(l)) {
            print_message("# %s: %-22s %-20s in %-14s no GPU kernel yet%s\n", name, l->name, l->kind->name, shape,
                          k ? ", BUT ONE SUPPORTS IT: take it off gpu_kernel_not_yet" : "");
            missing += k != NULL;
            continue;
        }
        if (k)
            print_message("# %s: %-22s %-20s in %-14s kernel %s\n", name, l->name, l->kind->name, shape, k->name);
        else
            print_message("# %s: %-22s %-20s in %-14s NO GPU KERNEL supports it\n", name, l->name, l->kind->name,
                          shape);
        missing += !k;
    }
    print_message("# %s: %d layers, %d without a GPU kernel\n", name, net.graph.n, missing);
    dl_net_free(&net);
    return missing;
}

static void every_layer_has_a_gpu_kernel(void **state)
{
    assert_int_equal(layers_without_gpu_kernel(*state), 0);
}

/* 1 when a bf16 GPU kernel serves l's kind. */
static int kind_has_gpu_bf16_kernel(const struct dl_layer *l)
{
    for (int i = 0; dl_kernels[i]; i++)
        if (dl_kernels[i]->device == DL_DEVICE_CUDA && dl_kernels[i]->dtype == DL_BF16 && dl_kernels[i]->op == l->kind)
            return 1;
    return 0;
}

/* The layers of nets/NAME.yaml that should compute in bf16 on the GPU under
 * --precision bf16 and get no bf16 kernel (each printed), after printing
 * every layer's kernel and dtype: a layer on autocast's list takes the
 * first bf16 kernel that supports it; another one does so only when every
 * input is bf16 (exec/steps.c), which it should wherever a bf16 GPU kernel
 * serves its kind. */
static int bf16_layers_without_bf16_kernel(const char *name)
{
    char path[1024];
    const char *src = getenv("top_srcdir");
    snprintf(path, sizeof path, "%s/nets/%s", src ? src : ".", name);
    struct dl_net net;
    struct dl_error err = {0};
    int rc = dl_net_load(path, &net, &err);
    if (rc)
        print_message("# %s\n", err.msg);
    assert_int_equal(rc, DL_OK);
    enum dl_dtype *out = calloc((size_t)net.graph.n, sizeof *out); /* each layer's output dtype */
    assert_non_null(out);
    int missing = 0, in_bf16 = 0;
    for (int i = 0; i < net.graph.n; i++) {
        const struct dl_layer *l = &net.graph.layers[i];
        int all_bf16 = 1;
        for (int j = 0; j < l->n_in; j++)
            all_bf16 &= l->in[j] != DL_GRAPH_INPUT && out[l->in[j]] == DL_BF16;
        struct dl_kernel_choices ch = {.device = DL_DEVICE_CUDA,
                                       .precision = l->kind->autocast_bf16 || all_bf16 ? DL_BF16 : DL_F32};
        if (gpu_kernel_not_yet(l)) { /* listed by every_layer_has_a_gpu_kernel; its output taken as f32 */
            out[i] = DL_F32;
            continue;
        }
        const struct dl_kernel *k = dl_kernel_select(l, &ch);
        assert_non_null(k); /* every layer has a GPU kernel: every_layer_has_a_gpu_kernel */
        out[i] = dl_kernel_tensor_dtype(k, l->out_shape);
        int want = l->kind->autocast_bf16 || (all_bf16 && kind_has_gpu_bf16_kernel(l));
        print_message("# %s bf16: %-22s %-20s kernel %-14s %s%s\n", name, l->name, l->kind->name, k->name,
                      k->dtype == DL_BF16 ? "bf16" : "f32", want && k->dtype != DL_BF16 ? "  NO BF16 GPU KERNEL" : "");
        missing += want && k->dtype != DL_BF16;
        in_bf16 += k->dtype == DL_BF16;
    }
    print_message("# %s bf16: %d of %d layers in bf16 on the GPU, %d without the bf16 kernel they should have\n",
                  name, in_bf16, net.graph.n, missing);
    free(out);
    dl_net_free(&net);
    return missing;
}

static void autocast_layers_have_gpu_bf16_kernels(void **state)
{
    assert_int_equal(bf16_layers_without_bf16_kernel(*state), 0);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The shipped networks, sorted; the GPT networks must be among them. */
static int shipped_nets(void)
{
    char dir[1024];
    const char *src = getenv("top_srcdir");
    snprintf(dir, sizeof dir, "%s/nets", src ? src : ".");
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < MAX_NETS;) {
        size_t len = strlen(e->d_name);
        if (len > 5 && len < sizeof names[0] && strcmp(e->d_name + len - 5, ".yaml") == 0)
            strcpy(names[n++], e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    return n;
}

int main(void)
{
#ifndef DL_HAVE_CUDA /* built under HAVE_CUDA only (tests/kernels.mk); said in case it is built elsewhere */
    printf("1..0 # SKIP this dltrain was built without --with-cuda: it has no GPU kernels\n");
    return 0;
#endif
    int n = shipped_nets(), gpt = 0;
    for (int i = 0; i < n; i++)
        gpt += !strcmp(names[i], "gpt-tiny.yaml") || !strcmp(names[i], "gpt2.yaml");
    if (gpt != 2) {
        printf("not ok 1 - nets/gpt-tiny.yaml and nets/gpt2.yaml found among %d networks (top_srcdir %s)\n", n,
               getenv("top_srcdir") ? getenv("top_srcdir") : "unset");
        return 1;
    }
    static char bf16_names[MAX_NETS][264];
    struct CMUnitTest tests[2 * MAX_NETS];
    for (int i = 0; i < n; i++) {
        snprintf(bf16_names[i], sizeof bf16_names[i], "%s bf16", names[i]);
        tests[2 * i] = (struct CMUnitTest){names[i], every_layer_has_a_gpu_kernel, NULL, NULL, names[i]};
        tests[2 * i + 1] = (struct CMUnitTest){bf16_names[i], autocast_layers_have_gpu_bf16_kernels, NULL, NULL,
                                               names[i]};
    }
    return _cmocka_run_group_tests("tests", tests, (size_t)(2 * n), NULL, NULL);
}
