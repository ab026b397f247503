# src/comm: communication backends (self always; mpi and nccl when found),
# allreduce algorithms on top of send/recv, their message tags, cost model,
# gradient codecs and the `dltrain bench comm` command.
libdltrain_a_SOURCES += \
	src/comm/comm.h src/comm/comm.c src/comm/self.c src/comm/standin.c src/comm/tags.h \
	src/comm/allreduce.h src/comm/allreduce.c src/comm/allreduce_util.c \
	src/comm/allreduce_ring.c src/comm/allreduce_recursive_doubling.c \
	src/comm/allreduce_rabenseifner.c src/comm/allreduce_tree.c src/comm/allreduce_ps.c src/comm/allreduce_bf16.c \
	src/comm/costmodel.h src/comm/costmodel.c src/comm/emulate.h src/comm/emulate.c \
	src/comm/agree.h src/comm/agree.c src/comm/widen.c src/comm/observed.h src/comm/observed.c src/comm/flight.h src/comm/flight.c src/comm/flight_compare.c src/comm/flight_fatal.c
if HAVE_MPI
libdltrain_a_SOURCES += src/comm/mpi.c
endif
if HAVE_CUDA
libdltrain_a_SOURCES += src/comm/nccl.c
endif
libdltrain_a_SOURCES += \
	src/comm/codec.h src/comm/codec.c src/comm/codec_1bit.c src/comm/codec_qsgd.c \
	src/comm/codec_topk.c

if HAVE_MPI
check_PROGRAMS += tests/test_comm_mpi
tests_test_comm_mpi_SOURCES = tests/test_comm_mpi.c tests/mpi_report.c tests/mpi_report.h
tests_test_comm_mpi_LDADD = libdltrain.a $(DL_LIBS)
endif
TESTS += tests/test_comm_mpi.sh
EXTRA_DIST += tests/test_comm_mpi.sh tests/mpi_tap.sh

# `dltrain bench comm` and its default sizes (DeepBench, credited in bench/data/README.md)
libdltrain_a_SOURCES += src/cli/bench_comm.c
nobase_dist_pkgdata_DATA += bench/data/deepbench_allreduce.csv
EXTRA_DIST += bench/data/README.md

if HAVE_CMOCKA
check_PROGRAMS += tests/test_comm_self tests/test_codec
tests_test_comm_self_SOURCES = tests/test_comm_self.c
tests_test_comm_self_CFLAGS = $(TEST_CFLAGS)
tests_test_comm_self_LDADD = $(TEST_LIBS)
tests_test_codec_SOURCES = tests/test_codec.c
tests_test_codec_CFLAGS = $(TEST_CFLAGS)
tests_test_codec_LDADD = $(TEST_LIBS)
TESTS += tests/test_comm_self tests/test_codec
if HAVE_CUDA
# The NCCL backend on a GPU; every case reports skipped where there is none.
check_PROGRAMS += tests/test_nccl
tests_test_nccl_SOURCES = tests/test_nccl.c
tests_test_nccl_CFLAGS = $(TEST_CFLAGS)
tests_test_nccl_LDADD = $(TEST_LIBS)
TESTS += tests/test_nccl
endif
endif
EXTRA_DIST += tests/test_nccl.c
