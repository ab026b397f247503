# src/ops/pool_bn.mk: pooling (max, average, adaptive, global) and batch
# normalisation reference ops.
DL_REAL_SOURCES += src/ops/pool_geometry.h src/ops/maxpool.c src/ops/avgpool.c \
	src/ops/global_avgpool.c src/ops/batchnorm.c
