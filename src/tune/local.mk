# src/tune: the autotuner (candidates, timing, Pareto sets, micro-batch DP,
# workspace-division ILP on GLPK, the SQLite tuning database).  Float build
# only: it times the real kernels.
libdltrain_a_SOURCES += src/tune/tune.h src/tune/tune_impl.h src/tune/policy.c src/tune/dp.c \
	src/tune/pareto.c src/tune/ilp.c src/tune/key.c src/tune/db.c src/tune/measure.c \
	src/tune/gather.c src/tune/tuner.c
AM_CPPFLAGS += $(SQLITE_CFLAGS)
DL_LIBS += $(GLPK_LIBS) $(SQLITE_LIBS)
# The commands on top: dltrain tune and dltrain bench conv (src/cli/).
libdltrain_a_SOURCES += src/cli/tune.c src/cli/bench_conv.c
# The convolution suites of dltrain bench conv (credits in bench/data/README.md).
nobase_dist_pkgdata_DATA += bench/data/deepbench_conv_train.csv bench/data/resnet50_conv_layers.csv \
	bench/data/resnet50_v1.5_conv_layers.csv
