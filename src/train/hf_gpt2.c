/* hf_gpt2.c: Hugging Face's GPT-2 layout (see hf_gpt2.h). */
#include "train/hf_gpt2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "plan/shard.h"
#include "train/checkpoint.h"

#define PREFIX "transformer."
#define HEAD "lm_head"

/* Conv1D: an fc layer's 2-D weight, but not the head's. */
static int conv1d(const struct dl_layer *l, const struct dl_param_desc *p)
{
    return strcmp(l->kind->name, "fc") == 0 && p->ndim == 2 && strcmp(p->name, "weight") == 0 &&
           strcmp(l->name, HEAD) != 0;
}

static void file_name(const struct dl_layer *l, const struct dl_param_desc *p, int prefixed, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s.%s", prefixed && strcmp(l->name, HEAD) != 0 ? PREFIX : "", l->name, p->name);
}

/* The file's shape of p: [in, out] for a Conv1D weight, else p's. */
static void file_shape(const struct dl_layer *l, const struct dl_param_desc *p, int64_t *shape)
{
    for (int d = 0; d < p->ndim; d++)
        shape[d] = p->dims[conv1d(l, p) ? p->ndim - 1 - d : d];
}

/* dst[c][r] = src[r][c] for src [rows][cols]. */
static void transpose(float *dst, const float *src, long rows, long cols)
{
    for (long r = 0; r < rows; r++)
        for (long c = 0; c < cols; c++)
            dst[c * rows + r] = src[r * cols + c];
}

static int host_only(const struct dl_exec *e, struct dl_error *err)
{
    if (sizeof(dl_real) != 4)
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "Hugging Face weights are float32");
    const struct dl_grid_dims *d = e->shard ? &e->shard->dims : NULL;
    if (!dl_exec_device(e)->host_memory || (d && (d->tp > 1 || d->pp > 1)))
        return dl_errorf(err, DL_ERR_UNSUPPORTED, "Hugging Face weights go to and from one process's host memory "
                         "(not a device's, not a pipeline's stages)");
    return DL_OK;
}

int dl_hf_gpt2_export(const char *path, const struct dl_graph *g, const struct dl_exec *e, enum dl_dtype dtype,
                      struct dl_error *err)
{
    int rc = host_only(e, err), n = 0, cap = 1;
    for (int i = 0; i < g->n; i++)
        cap += g->layers[i].n_params;
    struct dl_st_tensor *t = rc ? NULL : dl_calloc((size_t)cap, sizeof *t, err);
    char (*names)[256] = t ? dl_calloc((size_t)cap, sizeof *names, err) : NULL;
    void **copies = names ? dl_calloc(2 * (size_t)cap, sizeof *copies, err) : NULL; /* [2n]: f32, bf16 */
    if (!rc && !copies)
        rc = DL_ERR_NOMEM;
    for (int i = 0; !rc && i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        for (int j = 0; !rc && j < l->n_params; j++) {
            const struct dl_param_desc *p = &l->param[j];
            const struct dl_param_desc *own = p->shares ? &g->layers[p->share_layer].param[p->share_param] : p;
            const float *data = p->shares ? e->param[p->share_layer][p->share_param] : e->param[i][j];
            file_name(l, p, 1, names[n], sizeof names[n]);
            t[n] = (struct dl_st_tensor){.name = names[n], .dtype = DL_ST_F32, .ndim = own->ndim, .data = data};
            file_shape(l, own, t[n].shape);
            if (conv1d(l, own) || dtype != DL_F32) { /* a copy: transposed, rounded, or both */
                float *f = dl_calloc((size_t)own->count, sizeof *f, err);
                dl_bf16 *b = f && dtype == DL_BF16 ? dl_calloc((size_t)own->count, sizeof *b, err) : NULL;
                if (f && conv1d(l, own))
                    transpose(f, data, own->dims[0], own->dims[1]);
                else if (f)
                    memcpy(f, data, sizeof *f * (size_t)own->count);
                copies[2 * n] = f;
                copies[2 * n + 1] = b;
                if (!f || (dtype == DL_BF16 && !b))
                    rc = DL_ERR_NOMEM;
                else if (b)
                    rc = dl_cast(f, DL_F32, b, DL_BF16, own->count, err);
                t[n].data = b ? (const void *)b : f;
                t[n].dtype = b ? DL_ST_BF16 : DL_ST_F32;
            }
            n++;
        }
    }
    struct dl_st_meta meta[] = {{"format", "pt"}};
    if (!rc)
        rc = dl_st_write(path, t, n, meta, 1, err);
    for (int k = 0; copies && k < 2 * n; k++)
        free(copies[k]);
    free(copies);
    free(names);
    free(t);
    return rc;
}

/* The file's tensor for p (with or without the prefix), or NULL. */
static const struct dl_st_entry *find(const struct dl_st_file *f, const struct dl_layer *l,
                                      const struct dl_param_desc *p)
{
    char name[300];
    file_name(l, p, 1, name, sizeof name);
    const struct dl_st_entry *t = dl_st_find(f, name);
    if (!t) {
        file_name(l, p, 0, name, sizeof name);
        t = dl_st_find(f, name);
    }
    return t;
}

static int known(const struct dl_st_file *f, const char *name, const struct dl_graph *g)
{
    size_t len = strlen(name);
    if ((len >= 9 && strcmp(name + len - 9, ".attn.bias") == 0) ||
        (len >= 16 && strcmp(name + len - 16, ".attn.masked_bias") == 0))
        return 1;
    const char *bare = strncmp(name, PREFIX, strlen(PREFIX)) == 0 ? name + strlen(PREFIX) : name;
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->layers[i].n_params; j++) {
            char want[300];
            snprintf(want, sizeof want, "%s.%s", g->layers[i].name, g->layers[i].param[j].name);
            if (strcmp(bare, want) == 0)
                return 1;
        }
    return 0;
}

int dl_hf_gpt2_import(const char *path, const struct dl_graph *g, struct dl_exec *e, struct dl_error *err)
{
    int rc = host_only(e, err);
    struct dl_st_file f;
    if (!rc)
        rc = dl_st_open(path, &f, err);
    if (rc)
        return rc;
    /* everything checked first */
    for (int i = 0; !rc && i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        for (int j = 0; !rc && j < l->n_params; j++) {
            const struct dl_param_desc *p = &l->param[j];
            if (p->shares)
                continue;
            const struct dl_st_entry *t = find(&f, l, p);
            int64_t want[DL_ST_MAX_DIMS];
            file_shape(l, p, want);
            char name[300], a[96], b[96];
            file_name(l, p, 1, name, sizeof name);
            int same = t && t->ndim == p->ndim;
            for (int d = 0; same && d < p->ndim; d++)
                same = t->shape[d] == want[d];
            dl_st_shape_str(p->ndim, want, a, sizeof a);
            if (!t)
                rc = dl_errorf(err, DL_ERR_SPEC, "%s: tensor '%s' (or '%s.%s') is missing: the weights are of another "
                               "network", path, name, l->name, p->name);
            else if (t->dtype != DL_ST_F32)
                rc = dl_errorf(err, DL_ERR_SPEC, "%s: tensor '%s': expected dtype F32, found %s", path, t->name,
                               dl_st_dtype_name(t->dtype));
            else if (!same) {
                dl_st_shape_str(t->ndim, t->shape, b, sizeof b);
                rc = dl_errorf(err, DL_ERR_SPEC, "%s: tensor '%s': expected shape %s, found %s", path, t->name, a, b);
            }
            double x;
            long at = rc ? -1 : dl_checkpoint_first_nonfinite(t, &x);
            if (at >= 0)
                rc = dl_errorf(err, DL_ERR_DATA, "%s: tensor '%s': element %ld is %g: expected finite weights", path,
                               t->name, at, x);
        }
    }
    for (int k = 0; !rc && k < f.n; k++)
        if (!known(&f, f.t[k].name, g))
            rc = dl_errorf(err, DL_ERR_SPEC, "%s: tensor '%.200s' is not part of %s: the weights are of another "
                           "network", path, f.t[k].name, "this network");
    for (int i = 0; !rc && i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        for (int j = 0; j < l->n_params; j++) {
            const struct dl_param_desc *p = &l->param[j];
            if (p->shares)
                continue;
            const struct dl_st_entry *t = find(&f, l, p);
            if (conv1d(l, p))
                transpose(e->param[i][j], t->data, p->dims[1], p->dims[0]);
            else
                memcpy(e->param[i][j], t->data, sizeof(float) * (size_t)p->count);
        }
    }
    dl_st_close(&f);
    return rc;
}
