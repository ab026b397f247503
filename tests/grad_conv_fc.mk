# tests/grad_conv_fc.mk: conv and fc: gradient checks, hand-computed forward
# values, shape and attribute errors, thread-count independence.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_grad_conv_fc
tests_test_grad_conv_fc_SOURCES = tests/test_grad_conv_fc.c $(GRADCHECK_SOURCES)
tests_test_grad_conv_fc_CPPFLAGS = $(GRADCHECK_CPPFLAGS)
tests_test_grad_conv_fc_CFLAGS = $(TEST_CFLAGS)
tests_test_grad_conv_fc_LDADD = $(TEST_LIBS64)
TESTS += tests/test_grad_conv_fc
endif
