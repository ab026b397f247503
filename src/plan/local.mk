# src/plan: the layout of one run, below the executor: the memory planner
# (buffer lifetimes -> offsets in one arena), the micro-batch plan the
# tuner hands to the executor, and what a rank of a parallel run runs: the
# grid's layout, pipeline stages and its shard.  (The planner that searches
# layouts is src/planner/, above the executor.)
DL_COMMON_SOURCES += src/plan/plan.c src/plan/plan.h src/plan/mbplan.c src/plan/mbplan.h \
	src/plan/rank_grid.c src/plan/rank_grid.h src/plan/stages.c src/plan/stages.h \
	src/plan/shard.c src/plan/shard.h src/plan/tp_split.c src/plan/tp_split.h

if HAVE_CMOCKA
check_PROGRAMS += tests/test_grid
tests_test_grid_SOURCES = tests/test_grid.c
tests_test_grid_CFLAGS = $(TEST_CFLAGS)
tests_test_grid_LDADD = $(TEST_LIBS)
check_PROGRAMS += tests/test_stages
tests_test_stages_SOURCES = tests/test_stages.c
tests_test_stages_CFLAGS = $(TEST_CFLAGS)
tests_test_stages_LDADD = $(TEST_LIBS)
check_PROGRAMS += tests/test_shard
tests_test_shard_SOURCES = tests/test_shard.c
tests_test_shard_CFLAGS = $(TEST_CFLAGS)
tests_test_shard_LDADD = $(TEST_LIBS)
TESTS += tests/test_grid tests/test_stages tests/test_shard
endif
