# src/data: IDX reader, dataset loading (MNIST family, explicit IDX files,
# synthetic), and the shuffling, sharding batcher.
DL_COMMON_SOURCES += \
	src/data/idx.c src/data/idx.h \
	src/data/dataset.c src/data/dataset.h \
	src/data/batcher.c src/data/batcher.h
