# src/ops/transformer.mk: the layers of a transformer (GELU, SwiGLU, layer
# norm and RMS norm on one shared computation, rotary and learned position
# embeddings, attention; reference ops, compiled as float and double).
DL_REAL_SOURCES += src/ops/gelu.c src/ops/feature_norm.c src/ops/feature_norm.h src/ops/layernorm.c src/ops/rmsnorm.c src/ops/rope.c src/ops/swiglu.c src/ops/moe.c src/ops/position_embedding.c src/ops/attention.c src/ops/attention.h
