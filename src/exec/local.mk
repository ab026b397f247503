# src/exec: the executor (buffers, parameter init, forward and backward).
DL_REAL_SOURCES += src/exec/exec.c src/exec/exec.h
