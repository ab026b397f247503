# src/ops/recurrent.mk: the recurrent layers (lstm, gru, rnn: their cells on
# one shared backpropagation through time; reference ops, compiled as float
# and double).
DL_REAL_SOURCES += src/ops/recurrent.h src/ops/recurrent.c src/ops/lstm.c src/ops/gru.c src/ops/rnn.c
