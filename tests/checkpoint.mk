# tests/checkpoint.mk: checkpoints, atomic files, safetensors, signals, NaN
# location (cmocka); NumPy reading a checkpoint and SIGKILL during writes
# (shell, through tests/ckpt_tool); fuzz regression inputs replayed without
# libFuzzer; the single-node Slurm cluster test.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_checkpoint
tests_test_checkpoint_SOURCES = tests/test_checkpoint.c
tests_test_checkpoint_CFLAGS = $(TEST_CFLAGS)
tests_test_checkpoint_LDADD = $(TEST_LIBS)
TESTS += tests/test_checkpoint
endif

check_PROGRAMS += tests/ckpt_tool
tests_ckpt_tool_SOURCES = tests/ckpt_tool.c
tests_ckpt_tool_LDADD = libdltrain.a $(DL_LIBS)
TESTS += tests/test_checkpoint_numpy.sh tests/test_checkpoint_kill.sh
EXTRA_DIST += tests/test_checkpoint_numpy.sh tests/test_checkpoint_kill.sh

# The unit-test programs (no shell tests), for tools/test's sanitizer build:
# make check TESTS="$(make -s print-unit-tests)".
print-unit-tests:
	@for t in $(TESTS); do case $$t in *.sh) ;; *) printf '%s ' $$t ;; esac; done; echo
.PHONY: print-unit-tests

# Fuzz targets (fuzz/, built with libFuzzer by fuzz/run) replayed over their
# seeds and every crash ever found, with the same entry points.
FUZZ_REPLAY_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)
tests_ckpt_tool_CPPFLAGS = $(FUZZ_REPLAY_CPPFLAGS)
check_PROGRAMS += tests/fuzz_replay_netfile tests/fuzz_replay_idx tests/fuzz_replay_safetensors tests/fuzz_replay_tokens tests/fuzz_replay_bpe \
	tests/fuzz_replay_hf_config tests/fuzz_replay_hf_tokenizer tests/fuzz_replay_float_table
tests_fuzz_replay_netfile_SOURCES = tests/fuzz_replay.c fuzz/fuzz_netfile.c fuzz/fuzz.h
tests_fuzz_replay_netfile_CPPFLAGS = $(FUZZ_REPLAY_CPPFLAGS) -DFUZZ_TARGET='"netfile"'
tests_fuzz_replay_netfile_LDADD = libdltrain.a $(DL_LIBS)
tests_fuzz_replay_idx_SOURCES = tests/fuzz_replay.c fuzz/fuzz_idx.c fuzz/fuzz.h
tests_fuzz_replay_idx_CPPFLAGS = $(FUZZ_REPLAY_CPPFLAGS) -DFUZZ_TARGET='"idx"'
tests_fuzz_replay_idx_LDADD = libdltrain.a $(DL_LIBS)
tests_fuzz_replay_safetensors_SOURCES = tests/fuzz_replay.c fuzz/fuzz_safetensors.c fuzz/fuzz.h
tests_fuzz_replay_safetensors_CPPFLAGS = $(FUZZ_REPLAY_CPPFLAGS) -DFUZZ_TARGET='"safetensors"'
tests_fuzz_replay_safetensors_LDADD = libdltrain.a $(DL_LIBS)
tests_fuzz_replay_tokens_SOURCES = tests/fuzz_replay.c fuzz/fuzz_tokens.c fuzz/fuzz.h
tests_fuzz_replay_tokens_CPPFLAGS = $(FUZZ_REPLAY_CPPFLAGS) -DFUZZ_TARGET='"tokens"'
tests_fuzz_replay_tokens_LDADD = libdltrain.a $(DL_LIBS)
tests_fuzz_replay_bpe_SOURCES = tests/fuzz_replay.c fuzz/fuzz_bpe.c fuzz/fuzz.h
tests_fuzz_replay_bpe_CPPFLAGS = $(FUZZ_REPLAY_CPPFLAGS) -DFUZZ_TARGET='"bpe"'
tests_fuzz_replay_bpe_LDADD = libdltrain.a $(DL_LIBS)
tests_fuzz_replay_hf_config_SOURCES = tests/fuzz_replay.c fuzz/fuzz_hf_config.c fuzz/fuzz.h
tests_fuzz_replay_hf_config_CPPFLAGS = $(FUZZ_REPLAY_CPPFLAGS) -DFUZZ_TARGET='"hf_config"'
tests_fuzz_replay_hf_config_LDADD = libdltrain.a $(DL_LIBS)
tests_fuzz_replay_hf_tokenizer_SOURCES = tests/fuzz_replay.c fuzz/fuzz_hf_tokenizer.c fuzz/fuzz.h
tests_fuzz_replay_hf_tokenizer_CPPFLAGS = $(FUZZ_REPLAY_CPPFLAGS) -DFUZZ_TARGET='"hf_tokenizer"'
tests_fuzz_replay_hf_tokenizer_LDADD = libdltrain.a $(DL_LIBS)
tests_fuzz_replay_float_table_SOURCES = tests/fuzz_replay.c fuzz/fuzz_float_table.c fuzz/fuzz.h
tests_fuzz_replay_float_table_CPPFLAGS = $(FUZZ_REPLAY_CPPFLAGS) -DFUZZ_TARGET='"float_table"'
tests_fuzz_replay_float_table_LDADD = libdltrain.a $(DL_LIBS)
TESTS += tests/fuzz_replay_netfile tests/fuzz_replay_idx tests/fuzz_replay_safetensors tests/fuzz_replay_tokens tests/fuzz_replay_bpe \
	tests/fuzz_replay_hf_config tests/fuzz_replay_hf_tokenizer tests/fuzz_replay_float_table
EXTRA_DIST += fuzz/run fuzz/corpus fuzz/netfile.dict fuzz/safetensors.dict fuzz/hf_tokenizer.dict tests/fuzz-regressions

# For fuzz/run, which links the targets with clang outside this build.
print-dl-libs:
	@echo $(OPENMP_CFLAGS) $(DL_LIBS)
.PHONY: print-dl-libs

# A one-node Slurm cluster started by the test itself (skipped where it
# cannot start); tests/fake_dltrain.sh stands in for the trainer in the
# preemption/requeue check of examples/slurm/preemptible.sh.
TESTS += tests/test_slurm.sh
EXTRA_DIST += tests/test_slurm.sh tests/fake_dltrain.sh examples/slurm
