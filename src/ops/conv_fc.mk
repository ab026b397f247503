# src/ops/conv_fc.mk: the convolution, fully connected and embedding op kinds.
DL_REAL_SOURCES += src/ops/conv.c src/ops/fc.c src/ops/embedding.c src/ops/embedding.h src/ops/vec.h
