# src/optim: optimizers (one file each) and learning-rate schedules.
DL_REAL_SOURCES += \
	src/optim/optim.c src/optim/optim.h src/optim/update_rules.h \
	src/optim/sgd.c src/optim/adagrad.c src/optim/rmsprop.c src/optim/adam.c src/optim/lars.c src/optim/lamb.c src/optim/muon.c \
	src/optim/schedule.c src/optim/schedule.h

# The update loops on the GPU (--with-cuda only; float: libdltrain.a alone).
if HAVE_CUDA
libdltrain_a_SOURCES += src/optim/cuda/optim_cuda.h src/optim/cuda/optim.c src/optim/cuda/optim_kernels.h \
	src/optim/cuda/optim_kernels.cu
endif
