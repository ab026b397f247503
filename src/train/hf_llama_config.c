/* hf_llama_config.c: LlamaConfig of a network and config.json (see
 * hf_llama_config.h). */
#include "train/hf_llama_config.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/attr.h"
#include "io/atomic_file.h"

#define EMBED "model.embed_tokens"
#define MOE "model.layers.0.block_sparse_moe"

/* The layer called name, or NULL. */
static const struct dl_layer *find_layer(const struct dl_graph *g, const char *name)
{
    int i = dl_graph_find(g, name);
    return i >= 0 ? &g->layers[i] : NULL;
}

static const struct dl_layer *first_of_kind(const struct dl_graph *g, const char *kind, int *count)
{
    const struct dl_layer *first = NULL;
    *count = 0;
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->layers[i].kind->name, kind) == 0) {
            first = first ? first : &g->layers[i];
            ++*count;
        }
    return first;
}

int dl_hf_is_llama(const struct dl_graph *g)
{
    return find_layer(g, EMBED) != NULL;
}

int dl_hf_llama_config_of(const struct dl_graph *g, struct dl_hf_llama_config *c, struct dl_error *err)
{
    memset(c, 0, sizeof *c);
    int n_attn, n_rope, n_norm;
    const struct dl_layer *embed = find_layer(g, EMBED), *gate = find_layer(g, "model.layers.0.mlp.gate_proj"),
                          *head = find_layer(g, "lm_head"), *attn = first_of_kind(g, "attention", &n_attn),
                          *rope = first_of_kind(g, "rope", &n_rope), *norm = first_of_kind(g, "rmsnorm", &n_norm),
                          *moe = find_layer(g, MOE);
    if (moe && strcmp(moe->kind->name, "moe") != 0)
        moe = NULL;
    const char *missing = !embed ? "an embedding '" EMBED "'"
                          : !gate && !moe ? "a layer 'model.layers.0.mlp.gate_proj' (or a moe '" MOE "')"
                          : !head ? "a layer 'lm_head'" : !attn ? "an attention layer" : !rope ? "a rope layer"
                          : !norm ? "an rmsnorm layer" : NULL;
    if (missing)
        return dl_errorf(err, DL_ERR_SPEC, "not a network of Hugging Face's LlamaForCausalLM: it has no %s", missing);
    c->vocab = dl_attr_int(embed, "vocab", 0);
    c->hidden = embed->out_shape.c;
    c->intermediate = moe ? dl_attr_int(moe, "units", 0) : gate->out_shape.c;
    c->layers = n_attn;
    c->heads = dl_attr_int(attn, "heads", 0);
    c->kv_heads = dl_attr_int(attn, "kv_heads", 0) ? dl_attr_int(attn, "kv_heads", 0) : c->heads;
    c->head_dim = dl_attr_int(rope, "head_dim", 0);
    c->max_positions = g->input.h;
    c->eps = dl_attr_float(norm, "eps");
    c->theta = dl_attr_float(rope, "theta");
    c->scaling_factor = dl_attr_float(rope, "scaling_factor");
    c->low_freq_factor = dl_attr_float(rope, "low_freq_factor");
    c->high_freq_factor = dl_attr_float(rope, "high_freq_factor");
    c->original_context = dl_attr_int(rope, "original_context", 0);
    c->tied = head->n_params > 0 && head->param[0].shares;
    if (!moe)
        return DL_OK;
    c->experts = dl_attr_int(moe, "experts", 0);
    c->experts_per_token = dl_attr_int(moe, "top_k", 0);
    c->router_aux_loss_coef = dl_attr_float(moe, "aux_loss");
    if (!dl_attr_int(moe, "normalize", 0) || dl_attr_float(moe, "capacity_factor") > 0 ||
        dl_attr_float(moe, "z_loss") > 0 || c->scaling_factor != 1)
        return dl_errorf(err, DL_ERR_SPEC, "'%s': not Mixtral's mixture (MixtralForCausalLM renormalises the gates, "
                         "drops nothing, has no z-loss and no rope scaling)", MOE);
    return DL_OK;
}

int dl_hf_llama_config_write(const char *path, const struct dl_hf_llama_config *c, struct dl_error *err)
{
    json_t *o = json_object(), *arch = json_array();
    json_array_append_new(arch, json_string(c->experts ? "MixtralForCausalLM" : "LlamaForCausalLM"));
    json_object_set_new(o, "architectures", arch);
    json_object_set_new(o, "model_type", json_string(c->experts ? "mixtral" : "llama"));
    json_object_set_new(o, "vocab_size", json_integer(c->vocab));
    json_object_set_new(o, "hidden_size", json_integer(c->hidden));
    json_object_set_new(o, "intermediate_size", json_integer(c->intermediate));
    json_object_set_new(o, "num_hidden_layers", json_integer(c->layers));
    json_object_set_new(o, "num_attention_heads", json_integer(c->heads));
    json_object_set_new(o, "num_key_value_heads", json_integer(c->kv_heads));
    json_object_set_new(o, "head_dim", json_integer(c->head_dim));
    json_object_set_new(o, "max_position_embeddings", json_integer(c->max_positions));
    json_object_set_new(o, "rms_norm_eps", json_real(c->eps));
    json_object_set_new(o, "rope_theta", json_real(c->theta));
    if (c->experts) {
        json_object_set_new(o, "num_local_experts", json_integer(c->experts));
        json_object_set_new(o, "num_experts_per_tok", json_integer(c->experts_per_token));
        json_object_set_new(o, "router_aux_loss_coef", json_real(c->router_aux_loss_coef));
        json_object_set_new(o, "output_router_logits", json_false());
        json_object_set_new(o, "sliding_window", json_null());
    } else if (c->scaling_factor != 1) {
        json_t *s = json_object();
        json_object_set_new(s, "rope_type", json_string("llama3"));
        json_object_set_new(s, "factor", json_real(c->scaling_factor));
        json_object_set_new(s, "low_freq_factor", json_real(c->low_freq_factor));
        json_object_set_new(s, "high_freq_factor", json_real(c->high_freq_factor));
        json_object_set_new(s, "original_max_position_embeddings", json_integer(c->original_context));
        json_object_set_new(o, "rope_scaling", s);
    } else {
        json_object_set_new(o, "rope_scaling", json_null());
    }
    json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tied));
    json_object_set_new(o, "attention_bias", json_false());
    json_object_set_new(o, "mlp_bias", json_false());
    json_object_set_new(o, "hidden_act", json_string("silu"));
    json_object_set_new(o, "torch_dtype", json_string("float32"));
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(o);
    if (!text)
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", path);
    int rc = dl_atomic_write_file(path, text, strlen(text), err);
    free(text);
    return rc;
}

/* The file's integer at key (def when absent or null); -1 with err for
 * another type. */
static int file_long(const char *path, json_t *o, const char *key, long def, long *v, struct dl_error *err)
{
    json_t *x = json_object_get(o, key);
    if (!x || json_is_null(x)) {
        *v = def;
        return DL_OK;
    }
    if (!json_is_integer(x))
        return dl_errorf(err, DL_ERR_DATA, "%s: %s: expected an integer", path, key);
    *v = (long)json_integer_value(x);
    return DL_OK;
}

static int file_double(const char *path, json_t *o, const char *key, double def, double *v, struct dl_error *err)
{
    json_t *x = json_object_get(o, key);
    if (!x || json_is_null(x)) {
        *v = def;
        return DL_OK;
    }
    if (!json_is_number(x))
        return dl_errorf(err, DL_ERR_DATA, "%s: %s: expected a number", path, key);
    *v = json_number_value(x);
    return DL_OK;
}

static int same_number(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fabs(a);
}

/* The integers and numbers checked: LlamaConfig's defaults where absent. */
static int check_sizes(const char *path, json_t *o, const struct dl_hf_llama_config *c, struct dl_error *err)
{
    const struct {
        const char *key;
        long net, def;
    } sizes[] = {
        {"vocab_size", c->vocab, 32000},           {"hidden_size", c->hidden, 4096},
        {"intermediate_size", c->intermediate, 11008}, {"num_hidden_layers", c->layers, 32},
        {"num_attention_heads", c->heads, 32},     {"num_key_value_heads", c->kv_heads, -1},
        {"head_dim", c->head_dim, -1},
        /* Mixtral's, MixtralConfig's defaults; a LLaMA's file has none (0) */
        {"num_local_experts", c->experts, c->experts ? 8 : 0},
        {"num_experts_per_tok", c->experts_per_token, c->experts ? 2 : 0},
    };
    long heads = 32, hidden = 4096;
    int rc = file_long(path, o, "num_attention_heads", 32, &heads, err);
    if (!rc)
        rc = file_long(path, o, "hidden_size", 4096, &hidden, err);
    for (size_t i = 0; !rc && i < sizeof sizes / sizeof sizes[0]; i++) {
        long v = 0, def = sizes[i].def;
        if (def < 0) /* kv heads default to the heads, head_dim to hidden / heads */
            def = strcmp(sizes[i].key, "head_dim") == 0 ? (heads ? hidden / heads : 0) : heads;
        rc = file_long(path, o, sizes[i].key, def, &v, err);
        if (!rc && v != sizes[i].net)
            rc = dl_errorf(err, DL_ERR_SPEC, "%s: %s: the network has %ld, the file %ld", path, sizes[i].key,
                           sizes[i].net, v);
    }
    const struct {
        const char *key;
        double net, def;
    } numbers[] = {{"rms_norm_eps", c->eps, 1e-6}, {"rope_theta", c->theta, 10000}};
    for (size_t i = 0; !rc && i < sizeof numbers / sizeof numbers[0]; i++) {
        double v;
        rc = file_double(path, o, numbers[i].key, numbers[i].def, &v, err);
        if (!rc && !same_number(numbers[i].net, v))
            rc = dl_errorf(err, DL_ERR_SPEC, "%s: %s: the network has %g, the file %g", path, numbers[i].key,
                           numbers[i].net, v);
    }
    return rc;
}

static int check_scaling(const char *path, json_t *o, const struct dl_hf_llama_config *c, struct dl_error *err)
{
    json_t *s = json_object_get(o, "rope_scaling");
    int scaled = s && !json_is_null(s);
    if (scaled != (c->scaling_factor != 1))
        return dl_errorf(err, DL_ERR_SPEC, "%s: rope_scaling: the network has %s, the file %s", path,
                         c->scaling_factor != 1 ? "Llama 3's scaling" : "none", scaled ? "some" : "none");
    if (!scaled)
        return DL_OK;
    json_t *type = json_object_get(s, "rope_type");
    if (!type)
        type = json_object_get(s, "type");
    if (!json_is_string(type) || strcmp(json_string_value(type), "llama3") != 0)
        return dl_errorf(err, DL_ERR_SPEC, "%s: rope_scaling.rope_type: expected llama3 (the one scaling dltrain's "
                         "rope has), found %s", path, json_is_string(type) ? json_string_value(type) : "none");
    const struct {
        const char *key;
        double net;
    } keys[] = {{"factor", c->scaling_factor}, {"low_freq_factor", c->low_freq_factor},
                {"high_freq_factor", c->high_freq_factor},
                {"original_max_position_embeddings", (double)c->original_context}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        double v;
        int rc = file_double(path, s, keys[i].key, NAN, &v, err);
        if (rc)
            return rc;
        if (!same_number(keys[i].net, v))
            return dl_errorf(err, DL_ERR_SPEC, "%s: rope_scaling.%s: the network has %g, the file %g", path,
                             keys[i].key, keys[i].net, v);
    }
    return DL_OK;
}

static int check_kinds(const char *path, json_t *o, const struct dl_hf_llama_config *c, struct dl_error *err)
{
    json_t *type = json_object_get(o, "model_type"), *act = json_object_get(o, "hidden_act"),
           *tied = json_object_get(o, "tie_word_embeddings");
    const char *want = c->experts ? "mixtral" : "llama";
    if (!json_is_string(type) || strcmp(json_string_value(type), want) != 0)
        return dl_errorf(err, DL_ERR_SPEC, "%s: model_type: expected %s, found %s", path, want,
                         json_is_string(type) ? json_string_value(type) : "none");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "silu") != 0))
        return dl_errorf(err, DL_ERR_SPEC, "%s: hidden_act: the network's MLP is SwiGLU (silu), the file has %s",
                         path, json_is_string(act) ? json_string_value(act) : "another");
    static const char *const biases[] = {"attention_bias", "mlp_bias"};
    for (int i = 0; i < 2; i++)
        if (json_is_true(json_object_get(o, biases[i])))
            return dl_errorf(err, DL_ERR_SPEC, "%s: %s: the network has none, the file true", path, biases[i]);
    int file_tied = tied ? json_is_true(tied) : 0; /* LlamaConfig's default: untied */
    if (file_tied != c->tied)
        return dl_errorf(err, DL_ERR_SPEC, "%s: tie_word_embeddings: the network has %s, the file %s", path,
                         c->tied ? "true" : "false", file_tied ? "true" : "false");
    return DL_OK;
}

int dl_hf_llama_config_check(const char *path, const struct dl_hf_llama_config *c, struct dl_error *err)
{
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (!o)
        return dl_errorf(err, DL_ERR_DATA, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    int rc = json_is_object(o) ? DL_OK : dl_errorf(err, DL_ERR_DATA, "%s: expected a JSON object", path);
    if (!rc)
        rc = check_kinds(path, o, c, err);
    if (!rc)
        rc = check_sizes(path, o, c, err);
    if (!rc)
        rc = check_scaling(path, o, c, err);
    json_decref(o);
    return rc;
}
