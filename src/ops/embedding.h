/* embedding.h: what the token embedding's kernels share with its reference
 * op (ops/embedding.c): where a tensor rank's part of the table starts. */
#ifndef DL_OPS_EMBEDDING_H
#define DL_OPS_EMBEDDING_H

/* The whole table's index of the first row of a layer's attributes: 0, or
 * where a tensor rank's part of the vocabulary starts (op.h's tp_vocab):
 * an id below it or past its rows gives zeros there. */
long dl_embedding_first_row(const void *attr);

#endif
