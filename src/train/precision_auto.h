/* precision_auto.h: train.precision auto, and the word owed to a user of
 * bf16 on a CPU without native bf16 products: a training step of the
 * network (zero grad, forward and backward on a random batch:
 * graph/random_batch.h) of at most 16 samples timed on this machine in fp32
 * and in bf16: a warm-up step of each, then the fastest of at least five
 * in each, taken in turns, more while the steps are short (up to 25 or 50
 * ms of each: a step a small network takes in half a millisecond is
 * otherwise at the mercy of the other processes on the machine); a bf16
 * warm-up step ten times fp32's stands alone. */
#ifndef DL_TRAIN_PRECISION_AUTO_H
#define DL_TRAIN_PRECISION_AUTO_H

#include "comm/comm.h"
#include "core/dtype.h"
#include "exec/exec.h"
#include "graph/graph.h"

struct dl_precision_probe {
    double f32_ms, bf16_ms; /* a step's time in each precision (the fastest of those taken) */
    int batch;              /* the samples a step took */
    int native;             /* backends/kernel.h's dl_kernel_bf16_native() on the rank that timed */
};

/* Times a step of g at `batch` samples (at least 1, at most 16) in each precision, with base's
 * options (NULL: the defaults; its kernel choices' precision replaced).
 * Collective on comm (NULL: this process alone): rank 0 times and the
 * others receive its figures, so that every rank decides alike. */
int dl_precision_probe(const struct dl_graph *g, int batch, const struct dl_exec_options *base,
                       struct dl_comm *comm, struct dl_precision_probe *p, struct dl_error *err);

/* auto's pick: bf16 where its step was faster, else fp32. */
enum dl_dtype dl_precision_faster(const struct dl_precision_probe *p);

/* Resolves a precision of train.precision's values (core/dtype.h's
 * dl_train_precision_names): auto becomes the faster, measured; bf16 on a
 * CPU without native bf16 is measured too, so that the caller can say how
 * much slower it is.  *p holds the probe's figures, or zeros where fp32
 * or native bf16 needed none (then dl_precision_slow says 0).  Collective
 * on comm where it probes: every rank passes the same precision. */
int dl_precision_resolve(int precision, const struct dl_graph *g, int batch, const struct dl_exec_options *base,
                         struct dl_comm *comm, enum dl_dtype *out, struct dl_precision_probe *p, struct dl_error *err);

/* What a probe found, into buf: auto's pick, the faster ("precision auto: bf16 (a
 * step of 16 samples took 1.87 ms in bf16, 4.24 ms in fp32 on this
 * machine: native bf16)"), or, for bf16 asked for (was_auto 0), how much
 * slower it is, the words of the warning. */
void dl_precision_describe(const struct dl_precision_probe *p, int was_auto, char *buf, size_t size);

/* 1 where a bf16 run measured slower than fp32 deserves a warning: the CPU
 * has no native bf16 and the bf16 step took longer. */
int dl_precision_slow(const struct dl_precision_probe *p);

#endif
