# src/backends: the kernel interface and registry, layouts and reorders, the
# reference kernel (both precisions), and the fast CPU kernels (float only).
DL_REAL_SOURCES += src/backends/kernel.h src/backends/registry.c src/backends/kernel_fault.c \
	src/backends/layout.c src/backends/layout.h \
	src/backends/reference/reference.c src/backends/reference/reference.h
# The bf16 reference (float build only: registry.c leaves it out of the double one).
libdltrain_a_SOURCES += src/backends/reference/reference_bf16.c
# Where buffers live (device.h): the host device serves both libraries; the
# opener (dl_device_open) and the CUDA device only the program's.
DL_COMMON_SOURCES += src/backends/device.h src/backends/device_host.c
libdltrain_a_SOURCES += src/backends/device.c src/backends/device_emulated.c
# A mixture of experts' rows to their experts' ranks and back (any moe kernel's).
libdltrain_a_SOURCES += src/backends/moe_rows.c src/backends/moe_rows.h
if HAVE_CUDA
libdltrain_a_SOURCES += src/backends/cuda/cuda.h src/backends/cuda/device.c \
	src/backends/cuda/device_kernels.h src/backends/cuda/device_kernels.cu \
	src/backends/cuda/cudnn_io.c src/backends/cuda/cudnn_io.h \
	src/backends/cuda/conv.c src/backends/cuda/fc.c src/backends/cuda/eltwise.c src/backends/cuda/pool.c \
	src/backends/cuda/batchnorm.c src/backends/cuda/softmax_xent.c \
	src/backends/cuda/softmax_xent_kernels.h src/backends/cuda/softmax_xent_kernels.cu \
	src/backends/cuda/fault.c src/backends/cuda/fault.h \
	src/backends/cuda/pointwise.c src/backends/cuda/pointwise_kernels.h src/backends/cuda/pointwise_kernels.cu \
	src/backends/cuda/join.c src/backends/cuda/launch.h \
	src/backends/cuda/gelu_kernels.h src/backends/cuda/gelu_kernels.cu \
	src/backends/cuda/layernorm.c src/backends/cuda/layernorm_kernels.h src/backends/cuda/layernorm_kernels.cu \
	src/backends/cuda/embedding.c src/backends/cuda/embedding_kernels.h src/backends/cuda/embedding_kernels.cu \
	src/backends/cuda/attention.c src/backends/cuda/attention_kernels.h src/backends/cuda/attention_kernels.cu \
	src/backends/cuda/gemm.c src/backends/cuda/gemm.h \
	src/backends/cuda/bias_kernels.h src/backends/cuda/bias_kernels.cu
endif
# CUDA sources (.cu) are compiled by nvcc (configure finds it next to the
# toolkit); the C side reaches them through plain C declarations.
SUFFIXES = .cu
.cu.o:
	@$(MKDIR_P) $(@D)
	$(NVCC) $(NVCCFLAGS) -I$(top_builddir) -I$(top_srcdir)/src -c -o $@ $<

# Float-only fast kernels (the double-precision test library has the
# reference kernel alone: see registry.c).
libdltrain_a_SOURCES += src/backends/attr.c src/backends/attr.h \
	src/backends/cpu_blas/openblas_core.c src/backends/cpu_blas/openblas_core.h \
	src/backends/cpu_simd/maxpool_nchw.c src/backends/cpu_simd/maxpool_blocked.c \
	src/backends/cpu_simd/maxpool_kernel.c src/backends/cpu_simd/max_rule.h src/backends/cpu_simd/simd.h \
	src/backends/cpu_simd/conv_direct.c src/backends/cpu_simd/relu_fold.c \
	src/backends/cpu_simd/batchnorm.c src/backends/cpu_simd/batchnorm_loops.c \
	src/backends/cpu_simd/softmax_xent.c src/backends/cpu_simd/layernorm.c src/backends/cpu_simd/swiglu.c \
	src/backends/cpu_simd/vec8.h
if HAVE_DNNL
libdltrain_a_SOURCES += \
	src/backends/cpu_onednn/onednn.h \
	src/backends/cpu_onednn/common.c src/backends/cpu_onednn/common.h \
	src/backends/cpu_onednn/conv.c src/backends/cpu_onednn/pool.c \
	src/backends/cpu_onednn/batchnorm.c src/backends/cpu_onednn/eltwise.c \
	src/backends/cpu_onednn/add.c src/backends/cpu_onednn/fc.c src/backends/cpu_onednn/fc_bf16.c \
	src/backends/cpu_onednn/attention_bf16.c \
	src/backends/cpu_onednn/unblock.c src/backends/cpu_onednn/unblock.h \
	src/backends/cpu_onednn/bf16_peak.c src/backends/cpu_onednn/bf16_peak.h
endif
if HAVE_DNNL
libdltrain_a_SOURCES += \
	src/backends/cpu_blas/blas.h src/backends/cpu_blas/gemm.c src/backends/cpu_blas/gemm.h src/backends/cpu_blas/seq_rows.h \
	src/backends/cpu_blas/fc.c src/backends/cpu_blas/fc_rows.c src/backends/cpu_blas/conv_im2col.c src/backends/cpu_blas/attention.c src/backends/cpu_blas/moe.c src/backends/cpu_blas/recurrent.c \
	src/backends/attention_rows.c src/backends/attention_rows.h
endif
