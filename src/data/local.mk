# src/data: IDX reader, dataset loading (MNIST family, explicit IDX files,
# synthetic), and the shuffling, sharding batcher.
DL_COMMON_SOURCES += \
	src/data/idx.c src/data/idx.h \
	src/data/dataset.c src/data/dataset.h \
	src/data/batcher.c src/data/batcher.h

if HAVE_CMOCKA
check_PROGRAMS += tests/test_data
tests_test_data_SOURCES = tests/test_data.c
tests_test_data_CFLAGS = $(TEST_CFLAGS)
tests_test_data_LDADD = $(TEST_LIBS)
TESTS += tests/test_data
endif
