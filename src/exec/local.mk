# src/exec: the executor (kernel choice, steps with explicit reorders, the
# planned arena, parameters, forward and backward).
DL_REAL_SOURCES += src/exec/exec.c src/exec/exec.h src/exec/exec_impl.h \
	src/exec/steps.c src/exec/run.c src/exec/micro.c
