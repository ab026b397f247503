# src/core: errors, shapes, the random number generator.
DL_REAL_SOURCES += \
	src/core/error.c src/core/error.h \
	src/core/rng.c src/core/rng.h \
	src/core/real.h src/core/shape.h \
	src/core/threads.c src/core/threads.h
