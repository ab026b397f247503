# src/parallel: consistency strategies (serial, sync data parallel with
# bucketed overlapped allreduce, local SGD, parameter server), stall detection
# and the data x tensor x pipeline grid of ranks.
libdltrain_a_SOURCES += \
	src/parallel/strategy.c src/parallel/strategy.h \
	src/parallel/serial.c src/parallel/sync.c src/parallel/local_sgd.c \
	src/parallel/grad_sync.c src/parallel/grad_sync.h \
	src/parallel/stall.c src/parallel/stall.h \
	src/parallel/param_server.c src/parallel/param_server.h \
	src/parallel/sync_bn.c src/parallel/sync_bn.h \
	src/parallel/grid.c src/parallel/grid.h \
	src/parallel/stages.c src/parallel/stages.h \
	src/parallel/shard.c src/parallel/shard.h

if HAVE_CMOCKA
check_PROGRAMS += tests/test_grid
tests_test_grid_SOURCES = tests/test_grid.c
tests_test_grid_CFLAGS = $(TEST_CFLAGS)
tests_test_grid_LDADD = $(TEST_LIBS)
check_PROGRAMS += tests/test_stages
tests_test_stages_SOURCES = tests/test_stages.c
tests_test_stages_CFLAGS = $(TEST_CFLAGS)
tests_test_stages_LDADD = $(TEST_LIBS)
check_PROGRAMS += tests/test_shard
tests_test_shard_SOURCES = tests/test_shard.c
tests_test_shard_CFLAGS = $(TEST_CFLAGS)
tests_test_shard_LDADD = $(TEST_LIBS)
TESTS += tests/test_grid tests/test_stages tests/test_shard
endif
