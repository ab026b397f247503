# src/data: readers (IDX, CIFAR binaries, image folders with JPEG/PNG decoding
# and transforms, text, llm.c token files), GPT-2's tokenizer, dataset
# loading, and the shuffling, sharding batcher with its pool of decode threads.
AM_CPPFLAGS += $(JPEG_CFLAGS) $(PNG_CFLAGS) $(PCRE2_CFLAGS) $(JANSSON_CFLAGS)
DL_LIBS += $(JPEG_LIBS) $(PNG_LIBS) $(PCRE2_LIBS)
DL_COMMON_SOURCES += \
	src/data/idx.c src/data/idx.h \
	src/data/dataset.c src/data/dataset.h \
	src/data/cifar.c src/data/cifar.h \
	src/data/float_table.h src/data/npy.c src/data/csv_table.c src/data/regression_data.c src/data/regression_data.h \
	src/data/image_decode.c src/data/image_decode.h \
	src/data/resample.c src/data/resample.h \
	src/data/transform.c src/data/transform.h \
	src/data/imagefolder.c src/data/imagefolder.h \
	src/data/prefetch.c src/data/prefetch.h \
	src/data/batcher.c src/data/batcher.h src/data/permutation.c src/data/permutation.h \
	src/data/text.c src/data/text.h \
	src/data/path_list.c src/data/path_list.h \
	src/data/token_file.c src/data/token_file.h src/data/token_windows.c src/data/token_windows.h \
	src/data/tokens.c src/data/tokens.h \
	src/data/utf8.c src/data/utf8.h \
	src/data/pretokenize.c src/data/pretokenize.h \
	src/data/bpe.c src/data/bpe.h src/data/tiktoken_file.c \
	src/data/hf_tokenizer.c src/data/hf_tokenizer.h

if HAVE_CMOCKA
check_PROGRAMS += tests/test_data
tests_test_data_SOURCES = tests/test_data.c
tests_test_data_CFLAGS = $(TEST_CFLAGS)
tests_test_data_LDADD = $(TEST_LIBS)
TESTS += tests/test_data
# GPT-2's tokenizer: the heap merge against the plain scan (data/bpe.h).
check_PROGRAMS += tests/test_bpe
tests_test_bpe_SOURCES = tests/test_bpe.c
tests_test_bpe_CFLAGS = $(TEST_CFLAGS)
tests_test_bpe_LDADD = $(TEST_LIBS)
TESTS += tests/test_bpe
endif

# Images: the decoder, transforms and pipeline against PIL and torchvision
# (tests/test_images.py, on image sets it generates).
check_PROGRAMS += tests/image_tool
tests_image_tool_SOURCES = tests/image_tool.c
tests_image_tool_LDADD = libdltrain.a $(DL_LIBS)
TESTS += tests/test_images.sh tests/test_datasets.sh
EXTRA_DIST += tests/test_images.sh tests/test_images.py tests/make_image_set.py tests/test_datasets.sh \
	tests/nets/resnet-tiny.yaml

# Replays the image decoder's fuzz corpus and regressions (fuzz/fuzz_image.c).
check_PROGRAMS += tests/fuzz_replay_image
tests_fuzz_replay_image_SOURCES = tests/fuzz_replay.c fuzz/fuzz_image.c fuzz/fuzz.h
tests_fuzz_replay_image_CPPFLAGS = $(FUZZ_REPLAY_CPPFLAGS) -DFUZZ_TARGET='"image"'
tests_fuzz_replay_image_LDADD = libdltrain.a $(DL_LIBS)
TESTS += tests/fuzz_replay_image
EXTRA_DIST += fuzz/fuzz_image.c fuzz/image.dict
