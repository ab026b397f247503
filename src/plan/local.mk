# src/plan: the memory planner (buffer lifetimes -> offsets in one arena).
DL_COMMON_SOURCES += src/plan/plan.c src/plan/plan.h
