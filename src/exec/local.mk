# src/exec: the executor (kernel choice, steps with explicit reorders, the
# planned arena, parameters, forward and backward).
DL_REAL_SOURCES += src/exec/exec.c src/exec/exec.h src/exec/exec_impl.h \
	src/exec/steps.c src/exec/place.c src/exec/run.c src/exec/micro.c src/exec/comm_steps.c src/exec/tp_steps.c src/exec/tp_rows.c src/exec/tp_samples.c src/exec/tp_group.c src/exec/gather.c \
	src/exec/readback.c src/exec/grad_norm.c src/exec/staging.c src/exec/trace_steps.c src/exec/recompute.c \
	src/exec/doc_mask.c

# One executor step of every tensor x pipeline grid against one process, under mpirun.
if HAVE_MPI
check_PROGRAMS += tests/test_exec_mpi
tests_test_exec_mpi_SOURCES = tests/test_exec_mpi.c tests/mpi_report.c tests/mpi_report.h tests/tp_nets.h
tests_test_exec_mpi_LDADD = libdltrain.a $(DL_LIBS)
endif
TESTS += tests/test_exec_mpi.sh
EXTRA_DIST += tests/test_exec_mpi.sh

# A tensor group's steps on the emulated device, staged or in place over a
# communicator of device buffers, against the host, under mpirun.
if HAVE_MPI
check_PROGRAMS += tests/test_exec_device_mpi
tests_test_exec_device_mpi_SOURCES = tests/test_exec_device_mpi.c tests/mpi_report.c tests/mpi_report.h tests/tp_nets.h
tests_test_exec_device_mpi_LDADD = libdltrain.a $(DL_LIBS)
endif
TESTS += tests/test_exec_device_mpi.sh
EXTRA_DIST += tests/test_exec_device_mpi.sh
