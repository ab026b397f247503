/* hf_llama_config.h: Hugging Face's LlamaConfig (config.json) of a network
 * written under LlamaForCausalLM's module names (nets/llama-tiny.yaml,
 * smollm2-135m, llama3.2-1b): read off the graph (the embedding's
 * vocabulary and width, the blocks' attention heads and kv heads, the rope
 * layers' head size, theta and Llama 3 scaling, the MLP's gate width, the RMS
 * norms' eps, whether the head is tied), written beside exported weights,
 * and checked against a config.json that comes with imported ones (each
 * key the file has that the network decides; a disagreement names the
 * key, the network's value and the file's).  A network whose blocks' MLPs
 * are `moe` layers named block_sparse_moe (nets/moe-tiny.yaml) is
 * Mixtral's MixtralForCausalLM: model_type mixtral, its experts and top k
 * (num_local_experts, num_experts_per_tok) and router_aux_loss_coef. */
#ifndef DL_TRAIN_HF_LLAMA_CONFIG_H
#define DL_TRAIN_HF_LLAMA_CONFIG_H

#include "graph/graph.h"

struct dl_hf_llama_config {
    long vocab, hidden, intermediate, layers, heads, kv_heads, head_dim, max_positions;
    double eps, theta;
    double scaling_factor, low_freq_factor, high_freq_factor; /* factor 1: no rope_scaling */
    long original_context;
    int tied;
    long experts, experts_per_token; /* 0: a dense MLP (LLaMA); else Mixtral's mixture */
    double router_aux_loss_coef;
};

/* 1 when g's layers carry LlamaForCausalLM's names (model.embed_tokens). */
int dl_hf_is_llama(const struct dl_graph *g);

/* c from g; DL_ERR_SPEC naming what is missing when g is not such a network. */
int dl_hf_llama_config_of(const struct dl_graph *g, struct dl_hf_llama_config *c, struct dl_error *err);

/* path (a config.json) written atomically, as LlamaConfig.to_json_string
 * would for c (architectures, model_type, the sizes, rope_theta and
 * rope_scaling, no biases, silu, float32). */
int dl_hf_llama_config_write(const char *path, const struct dl_hf_llama_config *c, struct dl_error *err);

/* The config.json at path against c: model_type llama, and every size,
 * eps, theta, rope_scaling and tie_word_embeddings the file gives (its
 * defaults, LlamaConfig's, where it gives none) equal to c's; no
 * attention or MLP biases, silu.  DL_ERR_SPEC naming the key, the
 * network's value and the file's; DL_ERR_IO/DL_ERR_DATA for a file that
 * cannot be read or is not JSON. */
int dl_hf_llama_config_check(const char *path, const struct dl_hf_llama_config *c, struct dl_error *err);

#endif
