/* hf_gpt2.h: weights in Hugging Face's GPT-2 layout (transformers'
 * GPT2LMHeadModel state_dict, safetensors): the same module names as
 * nets/gpt2.yaml's layers (h.0.attn.c_attn, ...) under "transformer.", the
 * head as "lm_head.weight" (a copy of the tied embedding), and the weights
 * of GPT-2's Conv1D layers (every fc layer but the head) stored [in, out],
 * where dltrain's fc, as PyTorch's Linear, has [out, in].  Export writes such
 * a file from an executor's weights (which GPT2LMHeadModel.load_state_dict
 * takes with strict=True); import (--init-from) reads one that
 * save_pretrained wrote, with or without the "transformer." prefix. */
#ifndef DL_TRAIN_HF_GPT2_H
#define DL_TRAIN_HF_GPT2_H

#include "exec/exec.h"

/* Writes e's weights (a whole network's, on the host) to path, as F32, or
 * as BF16 (dtype DL_BF16: each rounded to nearest even, for inference). */
int dl_hf_gpt2_export(const char *path, const struct dl_graph *g, const struct dl_exec *e, enum dl_dtype dtype,
                      struct dl_error *err);

/* Reads path into e's weights (a whole network's, on the host): every
 * parameter of g must be there with its shape (DL_ERR_SPEC naming the
 * tensor, expected against found), and every tensor of the file must be
 * one of g's, the tied head's copy, or GPT-2's attention masks (attn.bias,
 * attn.masked_bias); F32 only, every value finite (DL_ERR_DATA naming the
 * tensor and the element).  Nothing changes on error. */
int dl_hf_gpt2_import(const char *path, const struct dl_graph *g, struct dl_exec *e, struct dl_error *err);

#endif
