# tests/tune.mk: the autotuner: DP, Pareto, ILP and database on synthetic
# tables (test_tune), the tuner on small networks and micro-batched training
# equal to undivided training (test_tune_net; test_tune_net_isa.sh runs it
# again with oneDNN held to older instruction sets), and the commands with
# several processes sharing one database (test_tune_cli.sh); the kernel table
# measured on this CPU, taken without --tune (test_tune_defaults.sh).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_tune tests/test_tune_net
tests_test_tune_SOURCES = tests/test_tune.c
tests_test_tune_CFLAGS = $(TEST_CFLAGS)
tests_test_tune_LDADD = $(TEST_LIBS)
tests_test_tune_net_SOURCES = tests/test_tune_net.c tests/train_steps.c tests/train_steps.h \
	tests/decisions.c tests/decisions.h
tests_test_tune_net_CFLAGS = $(TEST_CFLAGS)
tests_test_tune_net_LDADD = $(TEST_LIBS)
TESTS += tests/test_tune tests/test_tune_net tests/test_tune_net_isa.sh
EXTRA_DIST += tests/test_tune_net_isa.sh
endif
TESTS += tests/test_tune_cli.sh tests/test_tune_defaults.sh
EXTRA_DIST += tests/test_tune_cli.sh tests/test_tune_defaults.sh
