# src/io: files the tool writes (metrics; checkpoints later).
libdltrain_a_SOURCES += src/io/metrics.c src/io/metrics.h
