/* layout.h: the memory layouts a tensor's values may be stored in.  PLAIN
 * is NCHW (the graph's edges, the reference ops).  BLOCK8 and BLOCK16 are
 * oneDNN's nChw8c (AVX2) and nChw16c (AVX-512): channels in blocks of 8 or
 * 16 innermost, the last block padded with zeros.  Their sizes and the
 * reorders between them are backends/layout.h's. */
#ifndef DL_CORE_LAYOUT_H
#define DL_CORE_LAYOUT_H

enum dl_layout { DL_LAYOUT_PLAIN, DL_LAYOUT_BLOCK8, DL_LAYOUT_BLOCK16, DL_N_LAYOUTS };

/* "nchw", "nChw8c", "nChw16c": the names messages and traces print. */
extern const char *const dl_layout_names[DL_N_LAYOUTS];

#endif
