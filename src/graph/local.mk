# src/graph: the layer DAG (name resolution, topological order, shape inference),
# and a language model's FLOPs per token (MFU).
DL_REAL_SOURCES += src/graph/graph.c src/graph/graph.h src/graph/random_batch.c src/graph/random_batch.h \
	src/graph/model_flops.c src/graph/model_flops.h
