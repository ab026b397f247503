/* emulate.h: an emulated slower network (--comm-emulate alpha=20us,bw=1GB/s),
 * a testing and teaching aid.  A communicator wrapper, over any backend,
 * delays every message as a network with latency alpha and bandwidth bw
 * would, so that the cases the network decides (the ones hybrid and
 * pipeline parallelism exist for) can be measured on one machine.
 *
 * What is delayed, and by how much (the wrapped call still runs, so the
 * real time adds to the emulated one: the delay is a lower bound):
 * - send and isend: the sender sleeps alpha + bytes/bw, then posts the
 *   message, so it reaches its receiver no earlier than a real link would
 *   deliver it.  The sender's thread is held for that time even by isend
 *   (a real network card would leave it free): overlap of a send with
 *   compute is not emulated, which makes pipeline sends pessimistic.
 * - the allreduce algorithms written on send/recv (ring, recursive
 *   doubling, Rabenseifner, tree, parameter server, codecs): through their
 *   point-to-point messages, each delayed as above, so each algorithm pays
 *   for its own message count and volume.
 * - the backend's native collectives, whose messages the wrapper cannot
 *   see: every rank sleeps the alpha-beta time of a textbook algorithm on p
 *   ranks, then calls the backend (m = bytes of the whole vector, b = bytes
 *   per rank):
 *     allreduce        ring:               2(p-1) alpha + 2(p-1)/p m / bw
 *     reduce_scatter   ring:               (p-1) (alpha + b / bw)
 *     allgather        ring:               (p-1) (alpha + b / bw)
 *     alltoallv        pairwise exchange:  (p-1) (alpha + s / bw), s the
 *                                          mean part this rank sends another
 *     bcast            binomial tree:      ceil(log2 p) (alpha + m / bw)
 *     barrier          dissemination:      ceil(log2 p) alpha
 * Receives, waits and tests are not delayed: their messages were.  Split
 * communicators (data, tensor, pipeline groups) are wrapped the same way. */
#ifndef DL_COMM_EMULATE_H
#define DL_COMM_EMULATE_H

#include <stddef.h>

#include "comm/comm.h"
#include "comm/costmodel.h"

struct dl_comm_emulation {
    double alpha; /* seconds per message */
    double bw;    /* bytes per second; 0: infinite (latency only) */
};

/* Parses "alpha=TIME,bw=RATE" (either key may be left out, not both; TIME
 * as dl_parse_duration, at most 10 s; RATE as dl_parse_rate).  opt names the
 * option in messages ("--comm-emulate"); bad input is DL_ERR_SPEC. */
int dl_comm_emulation_parse(const char *opt, const char *text, struct dl_comm_emulation *out,
                            struct dl_error *err);

/* "alpha 20 us, 1 GB/s" into buf. */
const char *dl_comm_emulation_str(const struct dl_comm_emulation *e, char *buf, size_t size);

/* Emulated seconds of one message of bytes. */
double dl_comm_emulation_message_s(const struct dl_comm_emulation *e, double bytes);

/* Emulated seconds of a native allreduce of bytes on p ranks (the ring's
 * cost above; 0 on one rank). */
double dl_comm_emulation_allreduce_s(const struct dl_comm_emulation *e, int p, double bytes);

/* Adds e to cost parameters measured on the real network: alpha to alpha,
 * 1/bw to every beta, so that the model predicts the emulated network. */
void dl_comm_emulation_cost(const struct dl_comm_emulation *e, struct dl_cost_params *cp);

/* Replaces *c by a communicator that delays its messages as e says and owns
 * the original (dl_comm_close closes both).  On error *c is unchanged. */
int dl_comm_emulate(struct dl_comm **c, const struct dl_comm_emulation *e, struct dl_error *err);

#endif
