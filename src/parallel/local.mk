# src/parallel: consistency strategies (serial, sync data parallel with
# bucketed overlapped allreduce, local SGD, parameter server, gossip over a
# topology's mixing matrices, elastic averaging), stall detection
# and the data x tensor x pipeline grid of ranks, pipeline schedules (generated,
# checked and timed).
libdltrain_a_SOURCES += \
	src/parallel/strategy.c src/parallel/strategy.h \
	src/parallel/serial.c src/parallel/sync.c src/parallel/local_sgd.c \
	src/parallel/mixing.c src/parallel/mixing.h src/parallel/gossip.c src/parallel/easgd.c \
	src/parallel/gossip_exchange.c src/parallel/gossip_exchange.h src/parallel/easgd_async.c \
	src/parallel/ps_shards.c src/parallel/ps_shards.h \
	src/parallel/buckets.c src/parallel/buckets.h src/parallel/grad_sync.c src/parallel/grad_sync.h \
	src/parallel/zero_grads.c src/parallel/zero_grads.h src/parallel/zero_weights.c src/parallel/zero_weights.h \
	src/parallel/stall.c src/parallel/stall.h \
	src/parallel/param_server.c \
	src/parallel/sync_bn.c src/parallel/sync_bn.h \
	src/parallel/zero.c src/parallel/zero.h \
	src/parallel/grid.c src/parallel/grid.h \
	src/parallel/watchdog.c src/parallel/watchdog.h \
	src/parallel/schedule.c src/parallel/schedule.h src/parallel/schedule_check.c \
	src/parallel/trace_ranks.c src/parallel/trace_ranks.h

# The gossip topologies' mixing matrices.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_mixing
tests_test_mixing_SOURCES = tests/test_mixing.c
tests_test_mixing_CFLAGS = $(TEST_CFLAGS)
tests_test_mixing_LDADD = $(TEST_LIBS)
TESTS += tests/test_mixing
endif

# The strategies driven directly under mpirun against their serial
# counterparts (tests/test_strategy_mpi.c, run by test_strategy_mpi.sh).
if HAVE_MPI
check_PROGRAMS += tests/test_strategy_mpi
tests_test_strategy_mpi_SOURCES = tests/test_strategy_mpi.c tests/mpi_report.c tests/mpi_report.h
tests_test_strategy_mpi_LDADD = libdltrain.a $(DL_LIBS)
endif
TESTS += tests/test_strategy_mpi.sh
EXTRA_DIST += tests/test_strategy_mpi.sh
