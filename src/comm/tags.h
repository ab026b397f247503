/* tags.h: every point-to-point message tag of the project, in one list, so
 * that a new protocol takes tags nobody else uses.  A tag only has to differ
 * from those of the protocols that can have messages in flight on the same
 * communicator at the same time: the stall detector and the parameter server
 * run on the main thread while the gradient allreduces and codecs run on the
 * communication thread (parallel/grad_sync.c); synchronised batch norm has a
 * communicator of its own.  Keeping all of them distinct makes that argument
 * unnecessary.  Protocols whose tags grow with the rank count take a range of
 * DL_TAG_MAX_RANKS or 2 x DL_TAG_MAX_RANKS tags; every tag stays below 32768,
 * the least upper bound MPI guarantees (MPI_TAG_UB). */
#ifndef DL_COMM_TAGS_H
#define DL_COMM_TAGS_H

/* Largest communicator the rank-dependent ranges below are sized for
 * (dl_allreduce refuses more). */
#define DL_TAG_MAX_RANKS 4096

enum dl_tag {
    /* comm/allreduce_tree.c: binomial reduce to rank 0, then broadcast. */
    DL_TAG_TREE_REDUCE = 1,
    DL_TAG_TREE_BCAST,
    /* comm/allreduce_ps.c: shards pushed to their server, sums pulled back. */
    DL_TAG_PS_ALLREDUCE_PUSH,
    DL_TAG_PS_ALLREDUCE_PULL,
    /* comm/allreduce_util.c: the power-of-two fix-up (extra ranks fold their
     * vector in before the algorithm and get the sum back after it). */
    DL_TAG_POW2_FOLD,
    DL_TAG_POW2_UNFOLD,
    /* comm/codec.c: compressed reduce-scatter and allgather of encodings. */
    DL_TAG_CODEC_SCATTER,
    DL_TAG_CODEC_GATHER,
    /* comm/codec_topk.c: a sparse set as header, indices, values, or dense. */
    DL_TAG_TOPK_HEADER,
    DL_TAG_TOPK_INDICES,
    DL_TAG_TOPK_VALUES,
    DL_TAG_TOPK_DENSE,
    /* comm/costmodel.c: the calibration's timed exchanges. */
    DL_TAG_COST_EXCHANGE,
    /* parallel/stall.c: "reached step s" messages to rank 0 (and 1). */
    DL_TAG_STALL_ARRIVE,
    /* parallel/param_server.c: a worker's gradient shard (or its "done"), the
     * server's fresh weight shard, and the final weights gathered on rank 0. */
    DL_TAG_PS_GRADIENT,
    DL_TAG_PS_WEIGHTS,
    DL_TAG_PS_FINAL,
    /* exec/gather.c: a grid rank's parameter slices, to world rank 0. */
    DL_TAG_GATHER_PARAMS,
    /* parallel/trace_ranks.c: --trace's clock exchanges with rank 0 at the
     * start, and each rank's events sent to rank 0 at the end. */
    DL_TAG_TRACE_CLOCK,
    DL_TAG_TRACE_EVENTS,
    /* exec/tp_rows.c, on the tensor group's communicator: the halo rows of a
     * height-split layer travelling up (to rank t - 1) and down, and their
     * gradients travelling back. */
    DL_TAG_HALO_UP,
    DL_TAG_HALO_DOWN,
    DL_TAG_HALO_GRAD_UP,
    DL_TAG_HALO_GRAD_DOWN,
    /* parallel/gossip_exchange.c: a rank's vector (gossip.c: weights and statistics) to an out-neighbour
     * (one message per neighbour and step; a pair's messages keep their order). */
    DL_TAG_GOSSIP,
    /* parallel/easgd_async.c: a worker's weight shard (or its "done") to a
     * server, and the server's center shard back. */
    DL_TAG_EASGD_PUSH,
    DL_TAG_EASGD_CENTER,
    /* comm/agree.c: a failed rank's status and message hash, to every rank. */
    DL_TAG_AGREE,
    /* comm/allreduce_bf16.c: each rank's bf16 block to its owner. */
    DL_TAG_BF16_SCATTER,
    /* train/tied.c, on the world: a pipeline rank's gradient of a tied
     * parameter, to the other ranks holding it. */
    DL_TAG_TIED,
    DL_TAG_FIXED_END, /* the fixed tags end here */

    /* Ranges: base + an offset below the range's width. */
    /* comm/allreduce_recursive_doubling.c: round with partner v ^ mask: + mask. */
    DL_TAG_RECURSIVE_DOUBLING = 256,
    /* comm/allreduce_rabenseifner.c: halving round + mask, doubling round + mask. */
    DL_TAG_HALVING = DL_TAG_RECURSIVE_DOUBLING + DL_TAG_MAX_RANKS,
    DL_TAG_DOUBLING = DL_TAG_HALVING + DL_TAG_MAX_RANKS,
    /* comm/allreduce_ring.c: reduce-scatter step s: + s; allgather step s: + p + s. */
    DL_TAG_RING = DL_TAG_DOUBLING + DL_TAG_MAX_RANKS,
    DL_TAG_END = DL_TAG_RING + 2 * DL_TAG_MAX_RANKS
};

/* exec/comm_steps.c: the tensors that cross a pipeline-stage edge travel on
 * the pipeline group's own communicator (parallel/grid.h), where nothing
 * else is sent, so they take every tag below this bound.  A message is
 * (chunk, edge, forward or gradient), where the edge (plan/shard.h) is a
 * (producing layer, reading stage) pair: so the virtual stages of an
 * interleaved pipeline, which may exchange the same layer's output with
 * one rank (a skip connection read by two of its stages), and the messages
 * a rank sends itself between its own stages, never share a tag within a
 * chunk.  Chunks are numbered modulo what fits: messages of one pair and
 * tag arrive in order, and every stage sends and receives its chunks in
 * order, so chunks far apart may share a tag. */
#define DL_TAG_PIPELINE_END 32767

/* The tag of chunk's message on edge (of `edges` in all; 2 * edges <=
 * DL_TAG_PIPELINE_END), is_grad 0 for the activation, 1 for its gradient. */
static inline int dl_tag_pipeline(int chunk, int edge, int edges, int is_grad)
{
    int per_chunk = 2 * (edges > 0 ? edges : 1);
    return (chunk % (DL_TAG_PIPELINE_END / per_chunk)) * per_chunk + 2 * edge + is_grad;
}

_Static_assert(DL_TAG_FIXED_END <= DL_TAG_RECURSIVE_DOUBLING, "fixed tags run into the ranges");
_Static_assert(DL_TAG_END <= 32767, "tags above 32767 need more than MPI guarantees (MPI_TAG_UB)");

#endif
