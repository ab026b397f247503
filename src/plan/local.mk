# src/plan: the memory planner (buffer lifetimes -> offsets in one arena) and
# the micro-batch plan the tuner hands to the executor.
DL_COMMON_SOURCES += src/plan/plan.c src/plan/plan.h src/plan/mbplan.c src/plan/mbplan.h
