/* registry.c: the table of every kernel of this build and the rules that
 * pick one per layer (--kernel choices, else the first registered kernel that
 * supports the layer: the fastest measured on the project's machine, see
 * bench/README.md).  Which kernels a build has is decided here, by the only
 * #ifdefs on the kernel libraries outside their own wrappers (cpu_blas/gemm.c,
 * openblas_core.c and core/threads.c, which set OpenBLAS's threads). */
#include "backends/kernel.h"

#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/reference/reference.h"
#if !defined(DL_REAL_DOUBLE) && defined(DL_HAVE_DNNL)
#include "backends/cpu_onednn/bf16_peak.h"
#include "backends/cpu_onednn/onednn.h"
#include "backends/cpu_blas/blas.h"
#include "backends/cpu_blas/gemm.h"
#include "backends/cpu_simd/simd.h"
#define DL_FAST_KERNELS 1
#endif
#if !defined(DL_REAL_DOUBLE) && defined(DL_HAVE_CUDA)
#include "backends/cuda/cuda.h"
#define DL_GPU_KERNELS 1
#endif

const struct dl_kernel *const dl_kernels[] = {
#ifdef DL_GPU_KERNELS
    DL_CUDA_KERNELS
#endif
#ifdef DL_FAST_KERNELS
    DL_SIMD_KERNELS
    DL_ONEDNN_KERNELS_FIRST
    DL_BLAS_KERNELS
    DL_ONEDNN_KERNELS_LAST
#endif
#ifndef DL_REAL_DOUBLE
    &dl_kernel_reference_bf16,
#endif
    &dl_kernel_reference,
    NULL,
};

static int serves(const struct dl_kernel *k, const struct dl_op_kind *op)
{
    return !k->op || !op || k->op == op;
}

const struct dl_kernel *dl_kernel_find(const struct dl_op_kind *op, const char *name)
{
    for (int i = 0; dl_kernels[i]; i++)
        if (strcmp(dl_kernels[i]->name, name) == 0 && serves(dl_kernels[i], op))
            return dl_kernels[i];
    return NULL;
}

int dl_kernel_choice_add(struct dl_kernel_choices *ch, const char *spec, struct dl_error *err)
{
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1])
        return dl_errorf(err, DL_ERR_SPEC, "--kernel: expected OP=NAME (e.g. conv=onednn or all=reference), "
                         "found '%s'", dl_short(spec).s);
    size_t klen = (size_t)(eq - spec);
    if (klen >= sizeof ch->key[0] || strlen(eq + 1) >= sizeof ch->name[0])
        return dl_errorf(err, DL_ERR_SPEC, "--kernel: '%s' is too long (OP at most %zu characters, NAME at most %zu)",
                         dl_short(spec).s, sizeof ch->key[0] - 1, sizeof ch->name[0] - 1);
    if (ch->n == DL_MAX_KERNEL_CHOICES)
        return dl_errorf(err, DL_ERR_SPEC, "--kernel: more than %d choices", DL_MAX_KERNEL_CHOICES);
    char key[64];
    memcpy(key, spec, klen);
    key[klen] = 0;
    const struct dl_op_kind *op = strcmp(key, "all") == 0 ? NULL : dl_op_find(key);
    if (!dl_kernel_find(op, eq + 1)) {
        char list[512] = "";
        for (int i = 0; dl_kernels[i]; i++) {
            if (!serves(dl_kernels[i], op) || strstr(list, dl_kernels[i]->name))
                continue;
            strncat(list, *list ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, dl_kernels[i]->name, sizeof list - strlen(list) - 1);
        }
        return dl_errorf(err, DL_ERR_SPEC, "--kernel %s: no kernel '%s'%s%s in this build; expected one of %s",
                         spec, eq + 1, op ? " for op " : "", op ? key : "", list);
    }
    snprintf(ch->key[ch->n], sizeof ch->key[0], "%s", key);
    snprintf(ch->name[ch->n], sizeof ch->name[0], "%s", eq + 1);
    ch->n++;
    return DL_OK;
}

int dl_kernel_usable(const struct dl_kernel *k, const struct dl_layer *l, const struct dl_kernel_choices *ch)
{
    if (ch && ch->sync_stats && k && k->whole_batch && !k->sync_stats)
        return 0;
    if (k && k->device != (ch ? ch->device : DL_DEVICE_CPU))
        return 0;
    if (ch && ch->doc_mask && k && l->kind->doc_mask && !k->doc_mask)
        return 0;
    if (ch && ch->experts && k && l->kind->expert_split && !k->expert_parallel)
        return 0;
    return k && serves(k, l->kind) && (!k->supports || k->supports(l));
}

int dl_kernel_in_precision(const struct dl_kernel *k, const struct dl_kernel_choices *ch, int fallback)
{
    enum dl_dtype want = ch ? ch->precision : DL_F32;
    return fallback ? k->dtype == DL_F32 : k->dtype == want;
}

const struct dl_kernel *dl_kernel_select(const struct dl_layer *l, const struct dl_kernel_choices *ch)
{
    for (int i = ch ? ch->n - 1 : -1; i >= 0; i--) {
        if (strcmp(ch->key[i], "all") != 0 && strcmp(ch->key[i], l->kind->name) != 0 &&
            strcmp(ch->key[i], l->name) != 0)
            continue;
        const struct dl_kernel *k = dl_kernel_find(l->kind, ch->name[i]);
        if (dl_kernel_usable(k, l, ch))
            return k;
    }
    for (int fallback = 0; fallback < 2; fallback++)
        for (int i = 0; dl_kernels[i]; i++)
            if (dl_kernel_in_precision(dl_kernels[i], ch, fallback) && dl_kernel_usable(dl_kernels[i], l, ch) &&
                (!dl_kernels[i]->default_for || dl_kernels[i]->default_for(l)))
                return dl_kernels[i];
    return ch && ch->device != DL_DEVICE_CPU ? NULL : &dl_kernel_reference;
}

void dl_kernel_follow_layouts(const struct dl_layer *l, const enum dl_layout *offered, enum dl_layout *in,
                              enum dl_layout *out)
{
    for (int i = 0; i < l->n_in; i++)
        in[i] = offered[0];
    *out = offered[0];
}

void dl_kernel_layouts(const struct dl_kernel *k, const struct dl_layer *l, const enum dl_layout *offered,
                       enum dl_layout *in, enum dl_layout *out)
{
    for (int i = 0; i < l->n_in; i++)
        in[i] = DL_LAYOUT_PLAIN;
    *out = DL_LAYOUT_PLAIN;
    if (k->layouts)
        k->layouts(l, offered, in, out);
}

int dl_kernel_create_plain(const struct dl_kernel *k, const struct dl_layer *l, int mb,
                           struct dl_kernel_config *cfg, void **inst, struct dl_error *err)
{
    *cfg = (struct dl_kernel_config){.mb = mb};
    enum dl_layout offered[DL_MAX_INPUTS] = {DL_LAYOUT_PLAIN};
    dl_kernel_layouts(k, l, offered, cfg->in, &cfg->out);
    *inst = NULL;
    return dl_kernel_create(k, l, cfg, inst, err);
}

int dl_kernel_workspace(const struct dl_kernel *k, const struct dl_layer *l, int mb, size_t ws[DL_N_DIRS],
                        struct dl_error *err)
{
    struct dl_kernel_config cfg;
    void *inst;
    int rc = dl_kernel_create_plain(k, l, mb, &cfg, &inst, err);
    if (rc)
        return rc;
    for (int d = 0; d < DL_N_DIRS; d++)
        ws[d] = dl_kernel_workspace_bytes(k, inst, (enum dl_dir)d);
    k->destroy(inst);
    return DL_OK;
}

double dl_kernel_sgemm_peak(int n, const char **lib, const char **blas_core)
{
    *lib = "none";
    *blas_core = "none";
#ifdef DL_FAST_KERNELS
    double d = dl_gemm_gflops(DL_GEMM_DNNL, n, 5), o = dl_gemm_gflops(DL_GEMM_OPENBLAS, n, 5);
    *blas_core = dl_gemm_openblas_core();
    *lib = d >= o ? "dnnl_sgemm" : "openblas";
    return d >= o ? d : o;
#else
    return 0;
#endif
}

double dl_kernel_bf16_gemm_peak(int n, const char **impl)
{
    *impl = "none";
#ifdef DL_FAST_KERNELS
    return dl_dnnl_bf16_gemm_gflops(n, 5, impl);
#else
    (void)n;
    return 0;
#endif
}

int dl_kernel_bf16_native(void)
{
#ifdef DL_FAST_KERNELS
    return dl_dnnl_bf16_native();
#else
    return 0;
#endif
}

/* dnnl_version() returns {int major, minor, patch; const char *hash; ...}. */
struct onednn_version {
    int major, minor, patch;
    const char *hash;
};

void dl_kernel_libraries(char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    void *sym = dlsym(RTLD_DEFAULT, "dnnl_version");
    if (sym) {
        const struct onednn_version *(*fn)(void);
        memcpy(&fn, &sym, sizeof fn);
        const struct onednn_version *v = fn();
        used += (size_t)snprintf(buf, size, "onednn %d.%d.%d", v->major, v->minor, v->patch);
    }
    sym = dlsym(RTLD_DEFAULT, "openblas_get_config");
    if (sym && used < size) {
        char *(*fn)(void);
        memcpy(&fn, &sym, sizeof fn);
        snprintf(buf + used, size - used, "%s%s", used ? "; " : "", fn());
    }
}
