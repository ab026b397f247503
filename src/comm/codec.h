/* codec.h: gradient compression for the allreduce.  A codec (1-bit, QSGD,
 * top-k) is a small table of functions; a codec state holds one bucket's
 * error feedback on this rank (what compression left out of the last step is
 * added to the next one).  dl_compressed_allreduce sums a bucket over all
 * ranks the compressed way and reports the bytes it sent. */
#ifndef DL_CODEC_H
#define DL_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "core/rng.h"

struct dl_codec_spec;

/* A codec encodes a range of floats into a number of bytes that depends
 * only on the range's length.  Dense codecs go through the generic
 * reduce-scatter + allgather; sparse ones (top-k) have their own exchange. */
struct dl_codec_ops {
    const char *name;
    int sparse; /* 1: the encoding is (index, value) pairs (dl_topk_allreduce) */
    /* Bytes of the encoding of n floats. */
    size_t (*encoded_bytes)(const struct dl_codec_spec *s, size_t n);
    /* Writes encoded_bytes(n) bytes to out; rng for stochastic rounding. */
    void (*encode)(const struct dl_codec_spec *s, const float *v, size_t n, void *out,
                   struct dl_rng *rng);
    /* out[i] += decoded value i. */
    void (*decode_add)(const struct dl_codec_spec *s, const void *in, size_t n, float *out);
};

struct dl_codec_spec {
    const struct dl_codec_ops *ops; /* NULL: no compression ("none") */
    int bits;                       /* qsgd: bits per element, sign included (2..16) */
    double fraction;                /* topk: share of the elements kept, (0, 1] */
    char text[32];                  /* as given, for messages and tables */
};

struct dl_codec_stats {
    size_t bytes_sent;  /* by this rank, headers included */
    size_t dense_bytes; /* what the fp32 ring allreduce sends per rank: 2(p-1)/p * 4n */
    int went_dense;     /* top-k: the union became dense and the exchange switched */
};

struct dl_codec_state; /* one bucket on one rank: error feedback, RNG, work space */

extern const struct dl_codec_ops dl_codec_1bit;
extern const struct dl_codec_ops dl_codec_qsgd;
extern const struct dl_codec_ops dl_codec_topk;

/* Parses "none", "1bit", "qsgd:BITS" or "topk:FRACTION" (FRACTION in (0,1],
 * e.g. 0.01, or a percentage such as 1%).  Bad input is DL_ERR_SPEC with a
 * message that says what was expected. */
int dl_codec_parse(const char *text, struct dl_codec_spec *out, struct dl_error *err);

/* State for a bucket of n floats; seed should differ per rank (QSGD). */
int dl_codec_state_create(const struct dl_codec_spec *spec, size_t n, uint64_t seed,
                          struct dl_codec_state **out, struct dl_error *err);
void dl_codec_state_free(struct dl_codec_state *st);
/* The error feedback (n floats) kept for the next step (read-only view). */
const float *dl_codec_residual(const struct dl_codec_state *st);
/* The error feedback of the summed block this rank re-encodes (dense codecs:
 * n floats, of which this rank's block of dl_compressed_allreduce is used,
 * zeros elsewhere; all zeros for top-k).  With dl_codec_residual it makes the
 * codec's invariant checkable: over any number of steps, the sum of the
 * outputs plus every rank's two residuals equals the sum of the inputs. */
const float *dl_codec_server_residual(const struct dl_codec_state *st);

/* Sums buf[0..n) over the ranks of c through the codec of st (n must equal
 * the state's size) and adds this rank's compression error to the next
 * step.  Dense codecs: reduce-scatter and allgather of encoded blocks, each
 * block compressed again (with its own error feedback) after it was summed.
 * stats may be NULL. */
int dl_compressed_allreduce(struct dl_comm *c, struct dl_codec_state *st, float *buf, size_t n,
                            struct dl_codec_stats *stats, struct dl_error *err);

/* Top-k's own exchange (codec_topk.c): sparse recursive doubling that turns
 * dense when the union of indices would be no smaller as a dense vector.
 * v (n floats, gradient plus error feedback) is replaced by the sum over the
 * ranks of the kept elements; residual receives what this rank left out. */
int dl_topk_allreduce(struct dl_comm *c, const struct dl_codec_spec *spec, float *v, size_t n,
                      float *residual, struct dl_codec_stats *stats, struct dl_error *err);
/* Number of elements top-k keeps of n. */
size_t dl_topk_count(const struct dl_codec_spec *spec, size_t n);
/* Indices (ascending) of the k largest |v[i]| (ties: lower index first).
 * work: n floats. */
void dl_topk_select(const float *v, size_t n, size_t k, uint32_t *idx, float *work);

/* Byte-level packing shared by the codecs: `bits`-bit codes, little endian. */
void dl_bits_put(unsigned char *out, size_t i, int bits, uint32_t code);
uint32_t dl_bits_get(const unsigned char *in, size_t i, int bits);

#endif
