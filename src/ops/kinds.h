/* kinds.h: the list of op kinds (X-macro), in documentation order.  Each
 * entry names the `const struct dl_op_kind` defined in src/ops/<kind>.c
 * (layernorm and rmsnorm share ops/feature_norm.c; mse and l1
 * ops/regression_loss.c). */
#ifndef DL_OP_KINDS_H
#define DL_OP_KINDS_H

#include "ops/op.h"

#define DL_OP_LIST \
    DL_OP(dl_op_conv) \
    DL_OP(dl_op_fc) \
    DL_OP(dl_op_embedding) \
    DL_OP(dl_op_position_embedding) \
    DL_OP(dl_op_attention) \
    DL_OP(dl_op_layernorm) \
    DL_OP(dl_op_rmsnorm) \
    DL_OP(dl_op_rope) \
    DL_OP(dl_op_maxpool) \
    DL_OP(dl_op_avgpool) \
    DL_OP(dl_op_global_avgpool) \
    DL_OP(dl_op_batchnorm) \
    DL_OP(dl_op_relu) \
    DL_OP(dl_op_leaky_relu) \
    DL_OP(dl_op_sigmoid) \
    DL_OP(dl_op_tanh) \
    DL_OP(dl_op_gelu) \
    DL_OP(dl_op_swiglu) \
    DL_OP(dl_op_moe) \
    DL_OP(dl_op_lstm) \
    DL_OP(dl_op_gru) \
    DL_OP(dl_op_rnn) \
    DL_OP(dl_op_dropout) \
    DL_OP(dl_op_flatten) \
    DL_OP(dl_op_add) \
    DL_OP(dl_op_concat) \
    DL_OP(dl_op_softmax_xent) \
    DL_OP(dl_op_mse) \
    DL_OP(dl_op_l1)

#define DL_OP(sym) extern const struct dl_op_kind sym;
DL_OP_LIST
#undef DL_OP

#endif
