/* layout.c: the layouts' names (see layout.h). */
#include "core/layout.h"

const char *const dl_layout_names[DL_N_LAYOUTS] = {"nchw", "nChw8c", "nChw16c"};
