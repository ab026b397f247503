# src/plan: the memory planner (buffer lifetimes -> offsets in one arena),
# the micro-batch plan the tuner hands to the executor, and what a rank of
# a parallel run runs: the grid's layout, pipeline stages and its shard.
DL_COMMON_SOURCES += src/plan/plan.c src/plan/plan.h src/plan/mbplan.c src/plan/mbplan.h \
	src/plan/rank_grid.c src/plan/rank_grid.h src/plan/stages.c src/plan/stages.h \
	src/plan/shard.c src/plan/shard.h

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
check_PROGRAMS += tests/test_planner
tests_test_planner_SOURCES = tests/test_planner.c
tests_test_planner_CFLAGS = $(TEST_CFLAGS)
tests_test_planner_LDADD = $(TEST_LIBS)
TESTS += tests/test_grid tests/test_stages tests/test_shard tests/test_planner
endif

# The planner (doc/planner.md): a layout's predicted step time and memory
# per rank, the stage cuts and the search over layouts (it runs the
# schedule simulator and the executor's memory planner: library only).
libdltrain_a_SOURCES += src/plan/machine.c src/plan/machine.h \
	src/plan/machine_file.c src/plan/machine_file.h src/plan/layout_cost.c src/plan/layout_cost.h \
	src/plan/layout_memory.c src/plan/layout_memory.h src/plan/cuts.c src/plan/cuts.h \
	src/plan/search.c src/plan/search.h src/plan/consistency_cost.c src/plan/consistency_cost.h \
	src/plan/split_choice.c src/plan/split_choice.h

# `dltrain plan` and `--parallel auto` end to end (tests/test_plan_cli.sh).
TESTS += tests/test_plan_cli.sh
EXTRA_DIST += tests/test_plan_cli.sh
# `dltrain plan --machine FILE` against the options (tests/test_machine_file.sh).
TESTS += tests/test_machine_file.sh
EXTRA_DIST += tests/test_machine_file.sh
