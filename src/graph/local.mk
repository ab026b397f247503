# src/graph: the layer DAG (name resolution, topological order, shape inference).
DL_REAL_SOURCES += src/graph/graph.c src/graph/graph.h src/graph/random_batch.c src/graph/random_batch.h
