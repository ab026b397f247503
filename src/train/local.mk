# src/train: the training loop.
libdltrain_a_SOURCES += src/train/trainer.c src/train/trainer.h
