# src/plot: charts (cairo) for `dltrain plot`; without cairo chart.c alone
# is built and refuses.
libdltrain_a_SOURCES += src/plot/chart.c src/plot/chart.h
AM_CPPFLAGS += $(CAIRO_CFLAGS)
DL_LIBS += $(CAIRO_LIBS)
