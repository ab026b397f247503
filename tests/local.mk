# tests: unit tests (cmocka, TAP output) and command-line tests (shell, TAP).
# Every test program prints TAP so that `make check` counts individual cases.
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
SH_LOG_DRIVER = $(LOG_DRIVER)
SH_LOG_COMPILER = $(SHELL)
AM_TESTS_ENVIRONMENT = CMOCKA_MESSAGE_OUTPUT=TAP; export CMOCKA_MESSAGE_OUTPUT; \
	top_srcdir='$(abs_top_srcdir)'; top_builddir='$(abs_top_builddir)'; \
	export top_srcdir top_builddir; \
	OMPI_ALLOW_RUN_AS_ROOT=1; OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; \
	export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM; \
	OMP_NUM_THREADS=2; export OMP_NUM_THREADS; \
	DLTRAIN_TUNE_DB='$(abs_top_builddir)/tests/no-tune-db/tune.sqlite'; export DLTRAIN_TUNE_DB;
TEST_EXTENSIONS = .sh
TEST_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
TEST_LIBS = libdltrain.a $(DL_LIBS) $(CMOCKA_LIBS)
TEST_LIBS64 = libdlref64.a $(DL_LIBS) $(CMOCKA_LIBS)
EXTRA_DIST += tests/tap.sh tests/rank_faults.sh

if HAVE_CMOCKA
check_PROGRAMS += tests/test_rng tests/test_parse tests/test_dtype
tests_test_dtype_SOURCES = tests/test_dtype.c
tests_test_dtype_CFLAGS = $(TEST_CFLAGS)
tests_test_dtype_LDADD = $(TEST_LIBS)
tests_test_rng_SOURCES = tests/test_rng.c
tests_test_rng_CFLAGS = $(TEST_CFLAGS)
tests_test_rng_LDADD = $(TEST_LIBS)
tests_test_parse_SOURCES = tests/test_parse.c
tests_test_parse_CFLAGS = $(TEST_CFLAGS)
tests_test_parse_LDADD = $(TEST_LIBS)
TESTS += tests/test_rng tests/test_parse tests/test_dtype
# cli/option_table.h's parser of the commands' option tables.
check_PROGRAMS += tests/test_option_table
tests_test_option_table_SOURCES = tests/test_option_table.c
tests_test_option_table_CFLAGS = $(TEST_CFLAGS)
tests_test_option_table_LDADD = $(TEST_LIBS)
TESTS += tests/test_option_table

# graph/random_batch.h: the benchmarks' random batch, in the input's dtype.
check_PROGRAMS += tests/test_random_batch
tests_test_random_batch_SOURCES = tests/test_random_batch.c
tests_test_random_batch_CFLAGS = $(TEST_CFLAGS)
tests_test_random_batch_LDADD = $(TEST_LIBS)
TESTS += tests/test_random_batch
endif

# Devices (backends/device.h): the host's cases and dl_device_open's answers
# in every build; the same cases on a GPU in the CUDA build, skipped where
# there is none.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_device
tests_test_device_SOURCES = tests/test_device.c
tests_test_device_CFLAGS = $(TEST_CFLAGS)
tests_test_device_LDADD = $(TEST_LIBS)
TESTS += tests/test_device
# The same cases on the emulated device, and its guard against host access.
check_PROGRAMS += tests/test_device_emulated
tests_test_device_emulated_SOURCES = tests/test_device.c
tests_test_device_emulated_CPPFLAGS = $(AM_CPPFLAGS) -DTEST_ON_EMULATED
tests_test_device_emulated_CFLAGS = $(TEST_CFLAGS)
tests_test_device_emulated_LDADD = $(TEST_LIBS)
TESTS += tests/test_device_emulated
# Data parallelism's gradient buckets on a device: staged, or in place over
# a communicator of device buffers (NCCL's stand-in), equal to the host's.
check_PROGRAMS += tests/test_grad_sync_device
tests_test_grad_sync_device_SOURCES = tests/test_grad_sync_device.c
tests_test_grad_sync_device_CFLAGS = $(TEST_CFLAGS)
tests_test_grad_sync_device_LDADD = $(TEST_LIBS)
TESTS += tests/test_grad_sync_device
check_PROGRAMS += tests/test_optim_device
tests_test_optim_device_SOURCES = tests/test_optim_device.c
tests_test_optim_device_CFLAGS = $(TEST_CFLAGS)
tests_test_optim_device_LDADD = $(TEST_LIBS)
TESTS += tests/test_optim_device
if HAVE_CUDA
check_PROGRAMS += tests/test_optim_device_cuda
tests_test_optim_device_cuda_SOURCES = tests/test_optim_device.c
tests_test_optim_device_cuda_CPPFLAGS = $(AM_CPPFLAGS) -DTEST_ON_CUDA
tests_test_optim_device_cuda_CFLAGS = $(TEST_CFLAGS)
tests_test_optim_device_cuda_LDADD = $(TEST_LIBS)
TESTS += tests/test_optim_device_cuda
check_PROGRAMS += tests/test_device_cuda
tests_test_device_cuda_SOURCES = tests/test_device.c
tests_test_device_cuda_CPPFLAGS = $(AM_CPPFLAGS) -DTEST_ON_CUDA
tests_test_device_cuda_CFLAGS = $(TEST_CFLAGS)
tests_test_device_cuda_LDADD = $(TEST_LIBS)
TESTS += tests/test_device_cuda
endif
endif
TESTS += tests/test_device_cli.sh
EXTRA_DIST += tests/test_device_cli.sh
# Training on the emulated device (no host memory) equals the CPU run.
TESTS += tests/test_emulated_device.sh
EXTRA_DIST += tests/test_emulated_device.sh

# Gradient checks link the double-precision build of the ops (libdlref64.a).
GRADCHECK_SOURCES = tests/gradcheck.c tests/gradcheck.h
GRADCHECK_CPPFLAGS = $(AM_CPPFLAGS) -DDL_REAL_DOUBLE

if HAVE_CMOCKA
check_PROGRAMS += tests/test_grad_activations
tests_test_grad_activations_SOURCES = tests/test_grad_activations.c $(GRADCHECK_SOURCES)
tests_test_grad_activations_CPPFLAGS = $(GRADCHECK_CPPFLAGS)
tests_test_grad_activations_CFLAGS = $(TEST_CFLAGS)
tests_test_grad_activations_LDADD = $(TEST_LIBS64)
TESTS += tests/test_grad_activations
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test_grad_transformer
tests_test_grad_transformer_SOURCES = tests/test_grad_transformer.c tests/optest.h $(GRADCHECK_SOURCES)
tests_test_grad_transformer_CPPFLAGS = $(GRADCHECK_CPPFLAGS)
tests_test_grad_transformer_CFLAGS = $(TEST_CFLAGS)
tests_test_grad_transformer_LDADD = $(TEST_LIBS64)
TESTS += tests/test_grad_transformer
check_PROGRAMS += tests/test_grad_rnn
tests_test_grad_rnn_SOURCES = tests/test_grad_rnn.c tests/optest.h $(GRADCHECK_SOURCES)
tests_test_grad_rnn_CPPFLAGS = $(GRADCHECK_CPPFLAGS)
tests_test_grad_rnn_CFLAGS = $(TEST_CFLAGS)
tests_test_grad_rnn_LDADD = $(TEST_LIBS64)
TESTS += tests/test_grad_rnn
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test_grad_doc_mask
tests_test_grad_doc_mask_SOURCES = tests/test_grad_doc_mask.c tests/optest.h $(GRADCHECK_SOURCES)
tests_test_grad_doc_mask_CPPFLAGS = $(GRADCHECK_CPPFLAGS)
tests_test_grad_doc_mask_CFLAGS = $(TEST_CFLAGS)
tests_test_grad_doc_mask_LDADD = $(TEST_LIBS64)
TESTS += tests/test_grad_doc_mask
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test_netfile tests/test_optim
tests_test_netfile_SOURCES = tests/test_netfile.c
tests_test_netfile_CFLAGS = $(TEST_CFLAGS)
tests_test_netfile_LDADD = $(TEST_LIBS)
tests_test_optim_SOURCES = tests/test_optim.c tests/optim_reference.h
tests_test_optim_CFLAGS = $(TEST_CFLAGS)
tests_test_optim_LDADD = $(TEST_LIBS)
TESTS += tests/test_netfile tests/test_optim
endif

# dl_train as a program that calls the library runs it: the network file's
# train.precision chooses the kernels (issue 41).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_train
tests_test_train_SOURCES = tests/test_train.c
tests_test_train_CFLAGS = $(TEST_CFLAGS)
tests_test_train_LDADD = $(TEST_LIBS)
TESTS += tests/test_train
endif

# Pipeline schedules: generated, checked, timed against the bubble formulas.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_schedule
tests_test_schedule_SOURCES = tests/test_schedule.c
tests_test_schedule_CFLAGS = $(TEST_CFLAGS)
tests_test_schedule_LDADD = $(TEST_LIBS)
TESTS += tests/test_schedule
endif
TESTS += tests/test_gpu_check.sh tests/test_cpu_matrix.sh tests/test_tensorboard.sh tests/test_plot.sh tests/test_include_ladder.sh tests/test_text.sh tests/test_tokenizer.sh tests/test_hf_tokenizer.sh tests/test_gpt2.sh tests/test_generate.sh tests/test_no_decay.sh tests/test_layerwise.sh tests/test_precision.sh tests/test_hf.sh tests/test_hf_llama.sh tests/test_hf_mixtral.sh tests/test_train_samples.sh tests/test_tied.sh tests/test_gpt_tiny.sh tests/test_gpt_grid.sh tests/test_llama.sh tests/test_moe.sh tests/test_moe_ep.sh tests/test_rnn.sh tests/test_step_guard.sh tests/test_checkpoint_async.sh tests/test_flight_recorder.sh tests/test_doc_mask.sh tests/test_token_mean.sh tests/test_recompute.sh tests/test_zero.sh tests/test_zero3.sh tests/test_clip.sh tests/test_mutations_apply.sh tests/test_cli.sh tests/test_first_run.sh tests/test_job_messages.sh tests/test_cli_options.sh tests/test_parallel.sh tests/test_hybrid.sh tests/parallel_accuracy.sh \
	tests/test_resume.sh tests/test_checklist.sh tests/test_trace.sh tests/test_schedules_mpi.sh tests/test_regression.sh
EXTRA_DIST += tools/gpu-check tests/test_gpu_check.sh tests/test_cpu_matrix.sh tests/test_tensorboard.sh tests/check_tensorboard.py tests/test_plot.sh tests/test_include_ladder.sh tests/test_text.sh tests/test_tokenizer.sh tests/test_hf_tokenizer.sh tests/test_gpt2.sh tests/test_generate.sh tests/test_no_decay.sh tests/test_layerwise.sh tests/layerwise_check.py tests/test_precision.sh tests/test_hf.sh tests/test_hf_llama.sh tests/test_hf_mixtral.sh tests/hf_saved.sh tests/test_train_samples.sh tests/test_tied.sh tests/test_gpt_tiny.sh tests/test_gpt_grid.sh tests/test_llama.sh tests/test_moe.sh tests/test_moe_ep.sh tests/test_rnn.sh tests/test_step_guard.sh tests/test_checkpoint_async.sh tests/test_flight_recorder.sh tests/test_doc_mask.sh tests/test_token_mean.sh tests/test_recompute.sh tests/test_zero.sh tests/test_zero3.sh tests/test_clip.sh tests/test_mutations_apply.sh tests/text_corpus.sh tests/torch_check.sh tests/test_cli.sh tests/test_first_run.sh tests/set_keys.py tests/test_job_messages.sh tests/test_cli_options.sh tests/test_parallel.sh tests/test_hybrid.sh tests/parallel_accuracy.sh \
	tests/test_resume.sh tests/optim_reference.py tests/test_checklist.sh tests/test_trace.sh tests/check_trace.py \
	tests/test_schedules_mpi.sh tests/grid_runs.sh tests/test_regression.sh tests/regression_torch.py

# Gossip and EASGD from the command line (test_strategy_mpi checks their steps).
TESTS += tests/test_decentralized.sh
EXTRA_DIST += tests/test_decentralized.sh

# The class-split loss and height splits in training against one process
# (the comparison shared with test_hybrid.sh in grid_runs.sh).
TESTS += tests/test_split.sh
EXTRA_DIST += tests/test_split.sh

# --comm-emulate: delays as lower bounds, training bit for bit as without it.
TESTS += tests/test_comm_emulate.sh
EXTRA_DIST += tests/test_comm_emulate.sh

# dltrain check --grid's memory per rank against what real runs plan.
TESTS += tests/test_check_memory.sh
EXTRA_DIST += tests/test_check_memory.sh

# Checkpoints saved on one grid and resumed on others, local SGD's and
# --compress's checkpoints (against one process / the uninterrupted run).
TESTS += tests/test_ckpt_grid.sh
EXTRA_DIST += tests/test_ckpt_grid.sh

# Per-group fragments (op gradient checks, shipped networks).
include $(srcdir)/tests/grad_conv_fc.mk
include $(srcdir)/tests/grad_pool_bn.mk
include $(srcdir)/tests/grad_misc.mk
include $(srcdir)/tests/nets.mk

if HAVE_CMOCKA
check_PROGRAMS += tests/test_exec
tests_test_exec_SOURCES = tests/test_exec.c
tests_test_exec_CPPFLAGS = $(GRADCHECK_CPPFLAGS)
tests_test_exec_CFLAGS = $(TEST_CFLAGS)
tests_test_exec_LDADD = $(TEST_LIBS64)
TESTS += tests/test_exec
endif
include $(srcdir)/tests/checkpoint.mk
include $(srcdir)/tests/kernels.mk
include $(srcdir)/tests/tune.mk

# The full-size accuracy runs of issue 6 (about 20 minutes on 2 cores), and
# the PyTorch cross-check of AlexNet and VGG-16 too (2 minutes, 3-5 GB).
check-slow: dltrain
	DLTRAIN_FULL_ACCURACY=1 DLTRAIN_TORCH_ALL=1 $(MAKE) $(AM_MAKEFLAGS) check \
	    TESTS="tests/parallel_accuracy.sh tests/test_torch.sh"
.PHONY: check-slow

# Mutation testing (doc/testing.md): every bug in tests/mutations/ must be
# caught by the tests its patch names.  Not part of check (about 8 minutes):
# it rebuilds a private copy of the source tree once per mutation.
mutate:
	$(top_srcdir)/tools/mutate
.PHONY: mutate
EXTRA_DIST += tools/mutate tests/mutations doc/testing.md
