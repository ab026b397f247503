# tests/grad_pool_bn.mk: gradient checks, forward values and attribute/shape
# errors of the pooling and batch-normalisation ops.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_grad_pool_bn
tests_test_grad_pool_bn_SOURCES = tests/test_grad_pool_bn.c $(GRADCHECK_SOURCES)
tests_test_grad_pool_bn_CPPFLAGS = $(GRADCHECK_CPPFLAGS)
tests_test_grad_pool_bn_CFLAGS = $(TEST_CFLAGS)
tests_test_grad_pool_bn_LDADD = $(TEST_LIBS64)
TESTS += tests/test_grad_pool_bn
endif
