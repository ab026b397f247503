# src/io: files the tool writes (metrics; checkpoints later).
libdltrain_a_SOURCES += src/io/metrics.c src/io/metrics.h src/io/metrics_read.c src/io/metrics_read.h
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
# --tensorboard: event files (TFRecord records of protobuf-c-encoded Event
# messages; protoc-c compiles the .proto into the build tree).  Without
# protobuf-c and ISA-L, tensorboard.c alone is built and refuses.
libdltrain_a_SOURCES += src/io/tensorboard.c src/io/tensorboard.h
EXTRA_DIST += src/io/tensorboard_event.proto
if HAVE_TENSORBOARD
libdltrain_a_SOURCES += src/io/tfrecord.c src/io/tfrecord.h
nodist_libdltrain_a_SOURCES = src/io/tensorboard_event.pb-c.c src/io/tensorboard_event.pb-c.h
BUILT_SOURCES += src/io/tensorboard_event.pb-c.h
# (BUILT_SOURCES are made by `make all` and `make check` only; `make libdltrain.a` needs this)
src/io/tensorboard.$(OBJEXT): src/io/tensorboard_event.pb-c.h
CLEANFILES += src/io/tensorboard_event.pb-c.c src/io/tensorboard_event.pb-c.h
src/io/tensorboard_event.pb-c.h: src/io/tensorboard_event.pb-c.c
src/io/tensorboard_event.pb-c.c: $(srcdir)/src/io/tensorboard_event.proto
	$(AM_V_GEN)$(MKDIR_P) src/io && $(PROTOC_C) --proto_path=$(srcdir) --c_out=. $(srcdir)/src/io/tensorboard_event.proto
AM_CPPFLAGS += $(PROTOBUF_C_CFLAGS) $(ISAL_CFLAGS)
DL_LIBS += $(PROTOBUF_C_LIBS) $(ISAL_LIBS)
endif
# The --metrics reader's fuzz target, replayed over its seeds and crashes.
check_PROGRAMS += tests/fuzz_replay_metrics
tests_fuzz_replay_metrics_SOURCES = tests/fuzz_replay.c fuzz/fuzz_metrics.c fuzz/fuzz.h
tests_fuzz_replay_metrics_CPPFLAGS = $(FUZZ_REPLAY_CPPFLAGS) -DFUZZ_TARGET='"metrics"'
tests_fuzz_replay_metrics_LDADD = libdltrain.a $(DL_LIBS)
TESTS += tests/fuzz_replay_metrics
EXTRA_DIST += fuzz/fuzz_metrics.c
