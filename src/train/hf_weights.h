/* hf_weights.h: weights in Hugging Face's layouts (safetensors) of the two
 * families whose module names dltrain's networks carry.  GPT-2
 * (GPT2LMHeadModel, nets/gpt2.yaml's names): the layers under
 * "transformer.", the head "lm_head.weight" a copy of the tied embedding,
 * and GPT-2's Conv1D weights (every fc layer's but the head's) stored
 * [in, out], where dltrain's fc, as PyTorch's Linear, has [out, in].  LLaMA
 * (LlamaForCausalLM, nets/llama-tiny.yaml's names: model.embed_tokens,
 * model.layers.0.self_attn.q_proj, ..., lm_head): the layers' own names and
 * shapes, and a config.json beside them (train/hf_llama_config.h).  The
 * family is the network's: LLaMA when it has a layer model.embed_tokens. */
#ifndef DL_TRAIN_HF_WEIGHTS_H
#define DL_TRAIN_HF_WEIGHTS_H

#include "exec/exec.h"

/* "GPT-2" or "LLaMA": the layout g's weights go to and come from. */
const char *dl_hf_family(const struct dl_graph *g);

/* Writes e's weights (a whole network's, on the host) as F32, or as BF16
 * (dtype DL_BF16: each rounded to nearest even, for inference).  GPT-2:
 * path is the .safetensors file (GPT2LMHeadModel.load_state_dict takes it
 * with strict=True).  LLaMA: path is a folder, given config.json and
 * model.safetensors (what LlamaForCausalLM.from_pretrained reads), or a
 * file named *.safetensors (the weights alone). */
int dl_hf_export(const char *path, const struct dl_graph *g, const struct dl_exec *e, enum dl_dtype dtype,
                 struct dl_error *err);

/* Reads path into e's weights (a whole network's, on the host): a
 * .safetensors file, or a folder that save_pretrained wrote (its
 * model.safetensors, or the shards model.safetensors.index.json names; for
 * LLaMA its config.json, checked against the network first).  Every
 * parameter of g must be there with its shape (DL_ERR_SPEC naming the
 * tensor, expected against found), and every tensor of the files must be
 * one of g's, the tied head's copy, or GPT-2's attention masks (attn.bias,
 * attn.masked_bias); F32 only, every value finite (DL_ERR_DATA naming the
 * tensor and the element).  Nothing changes on error. */
int dl_hf_import(const char *path, const struct dl_graph *g, struct dl_exec *e, struct dl_error *err);

#endif
