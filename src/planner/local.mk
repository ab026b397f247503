# src/planner: the planner (doc/planner.md), above the executor and the
# parallel strategies: a layout's predicted step time and memory per rank,
# the stage cuts and the search over layouts (it runs the schedule
# simulator and the executor's memory planner: library only).
libdltrain_a_SOURCES += src/planner/machine.c src/planner/machine.h \
	src/planner/machine_file.c src/planner/machine_file.h src/planner/layout_cost.c src/planner/layout_cost.h \
	src/planner/layout_memory.c src/planner/layout_memory.h src/planner/cuts.c src/planner/cuts.h \
	src/planner/search.c src/planner/search.h src/planner/consistency_cost.c src/planner/consistency_cost.h \
	src/planner/tp_split_choice.c src/planner/tp_split_choice.h

# `dltrain plan` and `--parallel auto` end to end (tests/test_plan_cli.sh).
TESTS += tests/test_plan_cli.sh
EXTRA_DIST += tests/test_plan_cli.sh
# The planner with expert ranks (tests/test_plan_ep.sh).
TESTS += tests/test_plan_ep.sh
EXTRA_DIST += tests/test_plan_ep.sh
# `dltrain plan --machine FILE` against the options (tests/test_machine_file.sh).
TESTS += tests/test_machine_file.sh
EXTRA_DIST += tests/test_machine_file.sh

if HAVE_CMOCKA
check_PROGRAMS += tests/test_planner
tests_test_planner_SOURCES = tests/test_planner.c
tests_test_planner_CFLAGS = $(TEST_CFLAGS)
tests_test_planner_LDADD = $(TEST_LIBS)
TESTS += tests/test_planner
endif
