# tests/grad_misc.mk: gradient, forward-value and error tests of flatten, add,
# concat, softmax_cross_entropy, mse and l1 (test_grad_activations, which covers the
# activations and dropout, is registered in tests/local.mk), and the op kinds'
# capability flags checked against their reference ops (test_op_caps).
EXTRA_DIST += tests/optest.h tests/layer_params.h

if HAVE_CMOCKA
check_PROGRAMS += tests/test_grad_merge_loss
tests_test_grad_merge_loss_SOURCES = tests/test_grad_merge_loss.c tests/optest.h $(GRADCHECK_SOURCES)
tests_test_grad_merge_loss_CPPFLAGS = $(GRADCHECK_CPPFLAGS)
tests_test_grad_merge_loss_CFLAGS = $(TEST_CFLAGS)
tests_test_grad_merge_loss_LDADD = $(TEST_LIBS64)
TESTS += tests/test_grad_merge_loss
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test_op_caps
tests_test_op_caps_SOURCES = tests/test_op_caps.c tests/optest.h
tests_test_op_caps_CPPFLAGS = $(GRADCHECK_CPPFLAGS)
tests_test_op_caps_CFLAGS = $(TEST_CFLAGS)
tests_test_op_caps_LDADD = $(TEST_LIBS64)
TESTS += tests/test_op_caps
endif
