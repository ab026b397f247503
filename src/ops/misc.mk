# src/ops/misc.mk: element-wise activations, dropout, flatten, add, concat and
# the softmax cross-entropy and regression losses (reference ops, compiled as float and double).
DL_REAL_SOURCES += \
	src/ops/eltwise.h \
	src/ops/leaky_relu.c src/ops/sigmoid.c src/ops/tanh.c \
	src/ops/dropout.c src/ops/flatten.c src/ops/add.c src/ops/concat.c \
	src/ops/softmax_xent.c src/ops/softmax_xent.h src/ops/regression_loss.c
