# src/ops: one file per op kind (reference forward/backward) and the registry.
DL_REAL_SOURCES += \
	src/ops/op.h src/ops/registry.c
DL_REAL_SOURCES += src/ops/kinds.h src/ops/relu.c
