/* cifar.h: the binary versions of CIFAR-10 (data_batch_1..5.bin and
 * test_batch.bin: records of 1 label byte + 3072 pixel bytes) and CIFAR-100
 * (train.bin and test.bin: coarse label, fine label, 3072 pixel bytes; the
 * fine label is the class).  Pixels are 3 planes of 32 x 32, red first. */
#ifndef DL_CIFAR_H
#define DL_CIFAR_H

#include "core/error.h"

#define DL_CIFAR_SIDE 32
#define DL_CIFAR_SAMPLE_BYTES (3 * 32 * 32)

struct dl_cifar {
    long n;
    unsigned char *pixels; /* n x 3072 */
    int *labels;           /* n */
};

/* Reads the training (train = 1) or test split from dir.  Every file must
 * be a whole number of records and every label below classes (and below 10
 * or 100).  Errors name the file. */
int dl_cifar_read(const char *dir, int hundred, int train, int classes, struct dl_cifar *out,
                  struct dl_error *err);
void dl_cifar_free(struct dl_cifar *c);

#endif
