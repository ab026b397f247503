# src/core: errors, shapes, typed tensors, the random number generator, the clock, option
# value parsers, tensor dtypes and their casts, the files shipped with dltrain found from any folder,
# mkdir -p, pages handed back to the kernel.
DL_REAL_SOURCES += \
	src/core/clock.c src/core/clock.h src/core/thread_label.c src/core/thread_label.h \
	src/core/error.c src/core/error.h \
	src/core/parse.c src/core/parse.h \
	src/core/rng.c src/core/rng.h src/core/rng_hash.h src/core/host_device.h \
	src/core/real.h src/core/shape.h src/core/tensor.h src/core/layout.c src/core/layout.h src/core/long_loop.h \
	src/core/threads.c src/core/threads.h \
	src/core/shipped.c src/core/shipped.h \
	src/core/dtype.c src/core/dtype.h src/core/bf16.h \
	src/core/device_kind.c src/core/device_kind.h src/core/target_bits.h \
	src/core/folders.c src/core/folders.h src/core/pages.c src/core/pages.h
