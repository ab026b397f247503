# src/io: files the tool writes (metrics; checkpoints later).
libdltrain_a_SOURCES += src/io/metrics.c src/io/metrics.h
# Atomic files (temporary + fsync + rename) and the safetensors format.
libdltrain_a_SOURCES += src/io/atomic_file.c src/io/atomic_file.h \
	src/io/safetensors.c src/io/safetensors.h
# jansson parses safetensors headers (configure.ac requires it).
AM_CPPFLAGS += $(JANSSON_CFLAGS)
DL_LIBS += $(JANSSON_LIBS)
# --trace: the recorder (the executor appends to it, so both libraries
# hold it) and the Chrome trace-event JSON it becomes.
DL_COMMON_SOURCES += src/io/trace.c src/io/trace.h
libdltrain_a_SOURCES += src/io/trace_json.c src/io/trace_json.h
