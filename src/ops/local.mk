# src/ops: one file per op kind (reference forward/backward) and the registry.
# The op files are listed in per-group fragments.
DL_REAL_SOURCES += \
	src/ops/op.h src/ops/registry.c src/ops/kinds.h src/ops/relu.c
include $(srcdir)/src/ops/conv_fc.mk
include $(srcdir)/src/ops/pool_bn.mk
include $(srcdir)/src/ops/misc.mk
include $(srcdir)/src/ops/transformer.mk
include $(srcdir)/src/ops/recurrent.mk
