# src/parallel: consistency strategies (serial, sync data parallel with
# bucketed overlapped allreduce, local SGD, parameter server) and stall detection.
libdltrain_a_SOURCES += \
	src/parallel/strategy.c src/parallel/strategy.h \
	src/parallel/serial.c src/parallel/sync.c src/parallel/local_sgd.c \
	src/parallel/grad_sync.c src/parallel/grad_sync.h \
	src/parallel/stall.c src/parallel/stall.h \
	src/parallel/param_server.c \
	src/parallel/sync_bn.c src/parallel/sync_bn.h
