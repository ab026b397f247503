# src/optim: optimizers (one file each) and learning-rate schedules.
DL_REAL_SOURCES += \
	src/optim/optim.c src/optim/optim.h src/optim/update_rules.h \
	src/optim/sgd.c src/optim/adagrad.c src/optim/rmsprop.c src/optim/adam.c \
	src/optim/schedule.c src/optim/schedule.h
