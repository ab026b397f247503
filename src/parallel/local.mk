# src/parallel: consistency strategies (serial, sync data parallel with
# bucketed overlapped allreduce, local SGD, parameter server), stall detection
# and the data x tensor x pipeline grid of ranks, pipeline schedules (generated,
# checked and timed).
libdltrain_a_SOURCES += \
	src/parallel/strategy.c src/parallel/strategy.h \
	src/parallel/serial.c src/parallel/sync.c src/parallel/local_sgd.c \
	src/parallel/grad_sync.c src/parallel/grad_sync.h \
	src/parallel/stall.c src/parallel/stall.h \
	src/parallel/param_server.c \
	src/parallel/sync_bn.c src/parallel/sync_bn.h \
	src/parallel/grid.c src/parallel/grid.h \
	src/parallel/watchdog.c src/parallel/watchdog.h \
	src/parallel/schedule.c src/parallel/schedule.h src/parallel/schedule_check.c \
	src/parallel/trace_ranks.c src/parallel/trace_ranks.h

# The strategies driven directly under mpirun against their serial
# counterparts (tests/test_strategy_mpi.c, run by test_strategy_mpi.sh).
if HAVE_MPI
check_PROGRAMS += tests/test_strategy_mpi
tests_test_strategy_mpi_SOURCES = tests/test_strategy_mpi.c tests/mpi_report.c tests/mpi_report.h
tests_test_strategy_mpi_LDADD = libdltrain.a $(DL_LIBS)
endif
TESTS += tests/test_strategy_mpi.sh
EXTRA_DIST += tests/test_strategy_mpi.sh
