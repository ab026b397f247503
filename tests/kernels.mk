# tests/kernels.mk: the kernel, kernel attribute access, executor-with-fast-
# kernels and memory-planner tests (float build, libdltrain.a).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_exec_device
tests_test_exec_device_SOURCES = tests/test_exec_device.c
tests_test_exec_device_CFLAGS = $(TEST_CFLAGS)
tests_test_exec_device_LDADD = $(TEST_LIBS)
TESTS += tests/test_exec_device
check_PROGRAMS += tests/test_kernel_fault
tests_test_kernel_fault_SOURCES = tests/test_kernel_fault.c
tests_test_kernel_fault_CFLAGS = $(TEST_CFLAGS)
tests_test_kernel_fault_LDADD = $(TEST_LIBS)
TESTS += tests/test_kernel_fault
check_PROGRAMS += tests/test_kernels tests/test_attr tests/test_kernels_net tests/test_plan tests/test_openblas_core
tests_test_kernels_SOURCES = tests/test_kernels.c tests/kernel_check.c tests/kernel_check.h
tests_test_kernels_CFLAGS = $(TEST_CFLAGS)
tests_test_kernels_LDADD = $(TEST_LIBS)
tests_test_attr_SOURCES = tests/test_attr.c
tests_test_attr_CFLAGS = $(TEST_CFLAGS)
tests_test_attr_LDADD = $(TEST_LIBS)
tests_test_kernels_net_SOURCES = tests/test_kernels_net.c tests/train_steps.c tests/train_steps.h
tests_test_kernels_net_CFLAGS = $(TEST_CFLAGS)
tests_test_kernels_net_LDADD = $(TEST_LIBS)
tests_test_plan_SOURCES = tests/test_plan.c
tests_test_plan_CFLAGS = $(TEST_CFLAGS)
tests_test_plan_LDADD = $(TEST_LIBS)
tests_test_openblas_core_SOURCES = tests/test_openblas_core.c
tests_test_openblas_core_CFLAGS = $(TEST_CFLAGS)
tests_test_openblas_core_LDADD = $(TEST_LIBS)
TESTS += tests/test_kernels tests/test_attr tests/test_kernels_net tests/test_plan tests/test_openblas_core
if HAVE_CUDA
# The GPU's kernels against the host reference; skipped where there is no GPU.
check_PROGRAMS += tests/test_kernels_cuda
tests_test_kernels_cuda_SOURCES = tests/test_kernels.c tests/kernel_check.c tests/kernel_check.h
tests_test_kernels_cuda_CPPFLAGS = $(AM_CPPFLAGS) -DTEST_ON_CUDA
tests_test_kernels_cuda_CFLAGS = $(TEST_CFLAGS)
tests_test_kernels_cuda_LDADD = $(TEST_LIBS)
TESTS += tests/test_kernels_cuda
# Every layer of the shipped networks has a GPU kernel that supports it (no GPU needed).
check_PROGRAMS += tests/test_cuda_nets
tests_test_cuda_nets_SOURCES = tests/test_cuda_nets.c
tests_test_cuda_nets_CFLAGS = $(TEST_CFLAGS)
tests_test_cuda_nets_LDADD = $(TEST_LIBS)
TESTS += tests/test_cuda_nets
endif
endif
