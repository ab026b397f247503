# src/ops/conv_fc.mk: the convolution and fully connected op kinds.
DL_REAL_SOURCES += src/ops/conv.c src/ops/fc.c src/ops/vec.h
