/* model_flops.h: a language model's FLOPs per token as model FLOPs
 * utilisation (MFU) counts them (PaLM, appendix B; llm.c's and torchtitan's
 * 6N + 12 L C T): a training step's multiply-adds of every matrix product
 * with weights (fc, convolution and mixture-of-experts layers, the experts
 * a token goes to: 3 x their forward, for forward,
 * input gradient and weight gradient), plus attention's two products over
 * the whole window, 12 T C per token and attention layer (C its query
 * width, T the window), causal mask or not.  Work that is not in the model
 * (recomputation, tensor parallelism's copies) is not counted: MFU, not
 * hardware utilisation. */
#ifndef DL_GRAPH_MODEL_FLOPS_H
#define DL_GRAPH_MODEL_FLOPS_H

#include "graph/graph.h"

/* Per token of a network that reads token ids at T positions; 0 for
 * networks that do not. */
double dl_graph_model_flops_per_token(const struct dl_graph *g);

#endif
