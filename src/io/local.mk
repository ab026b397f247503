# src/io: files the tool writes (metrics; checkpoints later).
libdltrain_a_SOURCES += src/io/metrics.c src/io/metrics.h
# Atomic files (temporary + fsync + rename) and the safetensors format.
libdltrain_a_SOURCES += src/io/atomic_file.c src/io/atomic_file.h \
	src/io/safetensors.c src/io/safetensors.h
# jansson parses safetensors headers (configure.ac requires it).
AM_CPPFLAGS += $(JANSSON_CFLAGS)
DL_LIBS += $(JANSSON_LIBS)
