# src/cli
libdltrain_a_SOURCES += src/cli/cli.h src/cli/dispatch.c
