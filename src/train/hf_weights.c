/* hf_weights.c: Hugging Face's GPT-2 and LLaMA layouts (see hf_weights.h). */
#include "train/hf_weights.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/folders.h"
#include "io/safetensors.h"
#include "plan/shard.h"
#include "train/checkpoint.h"
#include "train/hf_llama_config.h"

#define HEAD "lm_head"
#define MAX_SHARDS 64

/* What a family's files differ in: the prefix of every name but the
 * head's, and whether fc weights are Conv1D's [in, out]. */
struct layout {
    const char *family, *prefix;
    int conv1d;
};

static const struct layout gpt2 = {"GPT-2", "transformer.", 1}, llama = {"LLaMA", "", 0},
                           mixtral = {"Mixtral", "", 0};

static const struct layout *layout_of(const struct dl_graph *g)
{
    struct dl_hf_llama_config c;
    struct dl_error quiet = {0};
    if (!dl_hf_is_llama(g))
        return &gpt2;
    return dl_hf_llama_config_of(g, &c, &quiet) == DL_OK && c.experts ? &mixtral : &llama;
}

const char *dl_hf_family(const struct dl_graph *g)
{
    return layout_of(g)->family;
}

/* Conv1D: an fc layer's 2-D weight, but not the head's, in GPT-2's layout. */
static int conv1d(const struct layout *y, const struct dl_layer *l, const struct dl_param_desc *p)
{
    return y->conv1d && strcmp(l->kind->name, "fc") == 0 && p->ndim == 2 && strcmp(p->name, "weight") == 0 &&
           strcmp(l->name, HEAD) != 0;
}

static void file_name(const struct layout *y, const struct dl_layer *l, const struct dl_param_desc *p, int prefixed,
                      char *buf, size_t n)
{
    snprintf(buf, n, "%s%s.%s", prefixed && strcmp(l->name, HEAD) != 0 ? y->prefix : "", l->name, p->name);
}

/* The experts a parameter stacks ([E, ...]: a moe layer's experts.w1, w2,
 * w3), which the files keep one tensor each, Mixtral's
 * LAYER.experts.E.w1.weight; 0 for any other parameter. */
static long experts_of(const struct dl_layer *l, const struct dl_param_desc *p)
{
    return strcmp(l->kind->name, "moe") == 0 && strncmp(p->name, "experts.", 8) == 0 && p->ndim == 3 ? p->dims[0]
                                                                                                        : 0;
}

/* Expert e's tensor of p: its name, and its elements [e count, (e + 1) count). */
static void expert_name(const struct layout *y, const struct dl_layer *l, const struct dl_param_desc *p, long e,
                        int prefixed, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s.experts.%ld.%s.weight", prefixed ? y->prefix : "", l->name, e, p->name + 8);
}

/* The file's shape of p: [in, out] for a Conv1D weight, else p's. */
static void file_shape(const struct layout *y, const struct dl_layer *l, const struct dl_param_desc *p,
                       int64_t *shape)
{
    for (int d = 0; d < p->ndim; d++)
        shape[d] = p->dims[conv1d(y, l, p) ? p->ndim - 1 - d : d];
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

/* The safetensors file of e's weights. */
static int export_weights(const char *path, const struct dl_graph *g, const struct dl_exec *e, enum dl_dtype dtype,
                          struct dl_error *err)
{
    const struct layout *y = layout_of(g);
    int rc = host_only(e, err), n = 0, cap = 1;
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->layers[i].n_params; j++) {
            long E = experts_of(&g->layers[i], &g->layers[i].param[j]);
            cap += E ? (int)E : 1;
        }
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
            long experts = experts_of(l, own);
            for (long x = 0; !rc && x < experts; x++) { /* one tensor an expert, in place */
                long count = own->count / experts;
                expert_name(y, l, own, x, 1, names[n], sizeof names[n]);
                t[n] = (struct dl_st_tensor){.name = names[n], .dtype = DL_ST_F32, .ndim = 2, .data = data + x * count,
                                             .shape = {own->dims[1], own->dims[2]}};
                if (dtype == DL_BF16) {
                    dl_bf16 *b = dl_calloc((size_t)count, sizeof *b, err);
                    copies[2 * n + 1] = b;
                    rc = !b ? DL_ERR_NOMEM : dl_cast(data + x * count, DL_F32, b, DL_BF16, count, err);
                    t[n].data = b, t[n].dtype = DL_ST_BF16;
                }
                n++;
            }
            if (experts)
                continue;
            file_name(y, l, p, 1, names[n], sizeof names[n]);
            t[n] = (struct dl_st_tensor){.name = names[n], .dtype = DL_ST_F32, .ndim = own->ndim, .data = data};
            file_shape(y, l, own, t[n].shape);
            if (conv1d(y, l, own) || dtype != DL_F32) { /* a copy: transposed, rounded, or both */
                float *f = dl_calloc((size_t)own->count, sizeof *f, err);
                dl_bf16 *b = f && dtype == DL_BF16 ? dl_calloc((size_t)own->count, sizeof *b, err) : NULL;
                if (f && conv1d(y, l, own))
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

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

int dl_hf_export(const char *path, const struct dl_graph *g, const struct dl_exec *e, enum dl_dtype dtype,
                 struct dl_error *err)
{
    if (!dl_hf_is_llama(g) || ends_with(path, ".safetensors"))
        return export_weights(path, g, e, dtype, err);
    struct dl_hf_llama_config c;
    char file[4200];
    snprintf(file, sizeof file, "%s/config.json", path);
    int rc = dl_hf_llama_config_of(g, &c, err);
    if (!rc)
        rc = dl_make_parents(file, err);
    if (!rc)
        rc = dl_hf_llama_config_write(file, &c, err);
    snprintf(file, sizeof file, "%s/model.safetensors", path);
    return rc ? rc : export_weights(file, g, e, dtype, err);
}

/* The files of an import: one, or save_pretrained's shards. */
struct files {
    int n;
    struct dl_st_file f[MAX_SHARDS];
};

static void files_close(struct files *fs)
{
    for (int i = 0; i < fs->n; i++)
        dl_st_close(&fs->f[i]);
    fs->n = 0;
}

static int files_add(struct files *fs, const char *path, struct dl_error *err)
{
    if (fs->n == MAX_SHARDS)
        return dl_errorf(err, DL_ERR_SPEC, "%s: more than %d shards", path, MAX_SHARDS);
    int rc = dl_st_open(path, &fs->f[fs->n], err);
    fs->n += !rc;
    return rc;
}

/* The shards model.safetensors.index.json's weight_map names, each once. */
static int open_shards(const char *dir, const char *index, struct files *fs, struct dl_error *err)
{
    json_error_t je;
    json_t *o = json_load_file(index, 0, &je), *map = o ? json_object_get(o, "weight_map") : NULL;
    if (!o)
        return dl_errorf(err, DL_ERR_DATA, "%s:%d:%d: %s", index, je.line, je.column, je.text);
    int rc = json_is_object(map) ? DL_OK : dl_errorf(err, DL_ERR_DATA, "%s: expected an object weight_map", index);
    const char *name;
    json_t *v;
    json_object_foreach(map, name, v) {
        if (rc)
            break;
        const char *shard = json_string_value(v);
        if (!shard || strchr(shard, '/')) {
            rc = dl_errorf(err, DL_ERR_DATA, "%s: weight_map.%.200s: expected a file name of this folder", index,
                           name);
            break;
        }
        char file[4200];
        snprintf(file, sizeof file, "%s/%s", dir, shard);
        int seen = 0;
        for (int i = 0; i < fs->n && !seen; i++)
            seen = strcmp(fs->f[i].name, file) == 0;
        if (!seen)
            rc = files_add(fs, file, err);
    }
    json_decref(o);
    return rc;
}

/* path's weights (a file, or save_pretrained's folder) into fs; a LLaMA
 * folder's config.json checked against g. */
static int open_weights(const char *path, const struct dl_graph *g, struct files *fs, struct dl_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return dl_errorf(err, DL_ERR_IO, "--init-from %s: no such file or folder", path);
    if (!S_ISDIR(st.st_mode))
        return files_add(fs, path, err);
    char file[4200];
    snprintf(file, sizeof file, "%s/config.json", path);
    if (dl_hf_is_llama(g) && access(file, F_OK) == 0) {
        struct dl_hf_llama_config c;
        int rc = dl_hf_llama_config_of(g, &c, err);
        if (!rc)
            rc = dl_hf_llama_config_check(file, &c, err);
        if (rc)
            return rc;
    }
    snprintf(file, sizeof file, "%s/model.safetensors", path);
    if (access(file, F_OK) == 0)
        return files_add(fs, file, err);
    snprintf(file, sizeof file, "%s/model.safetensors.index.json", path);
    if (access(file, F_OK) == 0)
        return open_shards(path, file, fs, err);
    return dl_errorf(err, DL_ERR_IO, "--init-from %s: a folder without model.safetensors or "
                     "model.safetensors.index.json", path);
}

static const struct dl_st_entry *find_name(const struct files *fs, const char *name)
{
    for (int i = 0; i < fs->n; i++) {
        const struct dl_st_entry *t = dl_st_find(&fs->f[i], name);
        if (t)
            return t;
    }
    return NULL;
}

/* The files' tensor for p (with or without the prefix), or NULL. */
static const struct dl_st_entry *find(const struct layout *y, const struct files *fs, const struct dl_layer *l,
                                      const struct dl_param_desc *p)
{
    char name[300];
    file_name(y, l, p, 1, name, sizeof name);
    const struct dl_st_entry *t = find_name(fs, name);
    if (!t) {
        file_name(y, l, p, 0, name, sizeof name);
        t = find_name(fs, name);
    }
    return t;
}

/* The files' tensor of expert x of p (with or without the prefix), or NULL. */
static const struct dl_st_entry *find_expert(const struct layout *y, const struct files *fs, const struct dl_layer *l,
                                             const struct dl_param_desc *p, long x)
{
    char name[300];
    expert_name(y, l, p, x, 1, name, sizeof name);
    const struct dl_st_entry *t = find_name(fs, name);
    if (!t) {
        expert_name(y, l, p, x, 0, name, sizeof name);
        t = find_name(fs, name);
    }
    return t;
}

static int known(const struct layout *y, const char *name, const struct dl_graph *g)
{
    size_t len = strlen(name), pre = strlen(y->prefix);
    if ((len >= 9 && strcmp(name + len - 9, ".attn.bias") == 0) ||
        (len >= 16 && strcmp(name + len - 16, ".attn.masked_bias") == 0))
        return 1;
    const char *bare = strncmp(name, y->prefix, pre) == 0 ? name + pre : name;
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->layers[i].n_params; j++) {
            char want[300];
            snprintf(want, sizeof want, "%s.%s", g->layers[i].name, g->layers[i].param[j].name);
            if (strcmp(bare, want) == 0)
                return 1;
            for (long x = 0; x < experts_of(&g->layers[i], &g->layers[i].param[j]); x++) {
                expert_name(y, &g->layers[i], &g->layers[i].param[j], x, 0, want, sizeof want);
                if (strcmp(bare, want) == 0)
                    return 1;
            }
        }
    return 0;
}

/* The files' tensor of p, or of its expert x (x >= 0), against p: there,
 * f32, of p's shape (an expert's: p's without its first dim), finite. */
static int check_tensor(const char *path, const struct layout *y, const struct files *fs, const struct dl_layer *l,
                        const struct dl_param_desc *p, long x, struct dl_error *err)
{
    const struct dl_st_entry *t = x >= 0 ? find_expert(y, fs, l, p, x) : find(y, fs, l, p);
    int64_t want[DL_ST_MAX_DIMS];
    int ndim = x >= 0 ? 2 : p->ndim, rc = DL_OK;
    file_shape(y, l, p, want);
    if (x >= 0)
        want[0] = p->dims[1], want[1] = p->dims[2];
    char name[300], a[96], b[96];
    if (x >= 0)
        expert_name(y, l, p, x, 1, name, sizeof name);
    else
        file_name(y, l, p, 1, name, sizeof name);
    int same = t && t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == want[d];
    dl_st_shape_str(ndim, want, a, sizeof a);
    if (!t)
        return dl_errorf(err, DL_ERR_SPEC, "%s: tensor '%s' (or '%s.%s') is missing: the weights are of another "
                         "network", path, name, l->name, p->name);
    if (t->dtype != DL_ST_F32)
        return dl_errorf(err, DL_ERR_SPEC, "%s: tensor '%s': expected dtype F32, found %s", path, t->name,
                         dl_st_dtype_name(t->dtype));
    if (!same) {
        dl_st_shape_str(t->ndim, t->shape, b, sizeof b);
        return dl_errorf(err, DL_ERR_SPEC, "%s: tensor '%s': expected shape %s, found %s", path, t->name, a, b);
    }
    double v;
    long at = dl_checkpoint_first_nonfinite(t, &v);
    if (at >= 0)
        rc = dl_errorf(err, DL_ERR_DATA, "%s: tensor '%s': element %ld is %g: expected finite weights", path, t->name,
                       at, v);
    return rc;
}

int dl_hf_import(const char *path, const struct dl_graph *g, struct dl_exec *e, struct dl_error *err)
{
    const struct layout *y = layout_of(g);
    int rc = host_only(e, err);
    struct files *fs = rc ? NULL : dl_calloc(1, sizeof *fs, err);
    if (!rc && !fs)
        rc = DL_ERR_NOMEM;
    if (!rc)
        rc = open_weights(path, g, fs, err);
    if (rc) {
        if (fs)
            files_close(fs);
        free(fs);
        return rc;
    }
    /* everything checked first */
    for (int i = 0; !rc && i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        for (int j = 0; !rc && j < l->n_params; j++) {
            const struct dl_param_desc *p = &l->param[j];
            if (p->shares)
                continue;
            long experts = experts_of(l, p);
            for (long x = 0; !rc && x < (experts ? experts : 1); x++)
                rc = check_tensor(path, y, fs, l, p, experts ? x : -1, err);
        }
    }
    for (int s = 0; !rc && s < fs->n; s++)
        for (int k = 0; !rc && k < fs->f[s].n; k++)
            if (!known(y, fs->f[s].t[k].name, g))
                rc = dl_errorf(err, DL_ERR_SPEC, "%s: tensor '%.200s' is not part of %s: the weights are of another "
                               "network", fs->f[s].name, fs->f[s].t[k].name, "this network");
    for (int i = 0; !rc && i < g->n; i++) {
        const struct dl_layer *l = &g->layers[i];
        for (int j = 0; j < l->n_params; j++) {
            const struct dl_param_desc *p = &l->param[j];
            if (p->shares)
                continue;
            long experts = experts_of(l, p);
            for (long x = 0; x < experts; x++) {
                long count = p->count / experts;
                memcpy(e->param[i][j] + x * count, find_expert(y, fs, l, p, x)->data, sizeof(float) * (size_t)count);
            }
            if (experts)
                continue;
            const struct dl_st_entry *t = find(y, fs, l, p);
            if (conv1d(y, l, p))
                transpose(e->param[i][j], t->data, p->dims[1], p->dims[0]);
            else
                memcpy(e->param[i][j], t->data, sizeof(float) * (size_t)p->count);
        }
    }
    files_close(fs);
    free(fs);
    return rc;
}
