# tests/grad_misc.mk: gradient, forward-value and error tests of flatten, add,
# concat and softmax_cross_entropy (test_grad_activations, which covers the
# activations and dropout, is registered in tests/local.mk).
EXTRA_DIST += tests/optest.h

if HAVE_CMOCKA
check_PROGRAMS += tests/test_grad_merge_loss
tests_test_grad_merge_loss_SOURCES = tests/test_grad_merge_loss.c tests/optest.h $(GRADCHECK_SOURCES)
tests_test_grad_merge_loss_CPPFLAGS = $(GRADCHECK_CPPFLAGS)
tests_test_grad_merge_loss_CFLAGS = $(TEST_CFLAGS)
tests_test_grad_merge_loss_LDADD = $(TEST_LIBS64)
TESTS += tests/test_grad_merge_loss
endif
