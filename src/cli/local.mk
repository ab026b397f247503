# src/cli: one file per subcommand, plus the shared network options.
libdltrain_a_SOURCES += \
	src/cli/cli.h src/cli/dispatch.c \
	src/cli/options.c src/cli/options.h src/cli/option_table.c src/cli/option_table.h \
	src/cli/train.c src/cli/check.c src/cli/check_grid.c src/cli/check_grid.h src/cli/help.c src/cli/bench.c \
	src/cli/bench_step.c src/cli/bench_data.c src/cli/bench_pipeline.c \
	src/cli/plan.c src/cli/layer_times.c src/cli/layer_times.h src/cli/train_auto.c src/cli/train_auto.h \
	src/cli/job_output.c src/cli/job_output.h src/cli/version.c src/cli/tokenize.c src/cli/generate.c src/cli/export.c \
	src/cli/plot.c src/cli/tune_table.c src/cli/tune_table.h src/cli/run_scalars.c src/cli/run_scalars.h
# torchvision's side of `dltrain bench data`, run from the installed data folder.
nobase_dist_pkgdata_SCRIPTS += bench/data-torchvision

# build-commit.h: the commit --version names (git describe of the source
# tree, "-dirty" with uncommitted changes; "unknown" outside a git clone),
# rewritten only when it changes so that nothing rebuilds needlessly.
BUILT_SOURCES += build-commit.h
CLEANFILES += build-commit.h
src/cli/version.$(OBJEXT): build-commit.h
build-commit.h: FORCE
	@c=$$(git -C "$(top_srcdir)" describe --always --dirty --abbrev=12 2>/dev/null || echo unknown); \
	echo "#define DL_BUILD_COMMIT \"$$c\"" > $@.tmp; \
	if cmp -s $@ $@.tmp; then rm -f $@.tmp; else mv $@.tmp $@; fi
FORCE:
.PHONY: FORCE
