/* widen.c: the reductions of bf16 values, summed in f32.  The values are
 * widened (exactly) into f32 in the communicator's widened buffer, summed
 * there by any f32 sum (an allreduce algorithm, MPI_Allreduce) and rounded
 * once back to bf16, to nearest even: the result is the f32 sum rounded
 * once, never a sum rounded at every addition.  What travels is f32. */
#include "comm/comm.h"

int dl_comm_sum_dtype_ok(enum dl_dtype dtype, struct dl_error *err)
{
    if ((unsigned)dtype < DL_DTYPE_COUNT && dl_dtype_traits(dtype)->is_float) /* f32, bf16 */
        return DL_OK;
    return dl_errorf(err, DL_ERR_INTERNAL, "a sum over the ranks of %s values (only f32 and bf16 are summed)",
                     (unsigned)dtype < DL_DTYPE_COUNT ? dl_dtype_name(dtype) : "unknown");
}

int dl_comm_sum_as_f32(struct dl_comm *c, void *buf, enum dl_dtype dtype, size_t n, dl_comm_f32_sum sum, void *ctx,
                       struct dl_error *err)
{
    int rc = dl_comm_sum_dtype_ok(dtype, err);
    if (rc != DL_OK)
        return rc;
    if (dtype == DL_F32)
        return sum(c, buf, n, ctx, err);
    float *wide = dl_comm_grow(&c->widened, &c->widened_bytes, n * sizeof *wide, "f32 copies of bf16 values", err);
    if (!wide)
        return DL_ERR_NOMEM;
    rc = dl_cast(buf, DL_BF16, wide, DL_F32, (long)n, err);
    if (rc == DL_OK)
        rc = sum(c, wide, n, ctx, err);
    return rc != DL_OK ? rc : dl_cast(wide, DL_F32, buf, DL_BF16, (long)n, err);
}

int dl_comm_scatter_as_f32(struct dl_comm *c, const void *send, void *recv, enum dl_dtype dtype, size_t count,
                           dl_comm_f32_scatter scatter, struct dl_error *err)
{
    int rc = dl_comm_sum_dtype_ok(dtype, err);
    if (rc != DL_OK)
        return rc;
    if (dtype == DL_F32)
        return scatter(c, send, recv, count, err);
    size_t all = (size_t)c->size * count;
    float *wide = dl_comm_grow(&c->widened, &c->widened_bytes, (all + count) * sizeof *wide,
                               "f32 copies of bf16 values", err);
    if (!wide)
        return DL_ERR_NOMEM;
    rc = dl_cast(send, DL_BF16, wide, DL_F32, (long)all, err);
    if (rc == DL_OK)
        rc = scatter(c, wide, wide + all, count, err);
    return rc != DL_OK ? rc : dl_cast(wide + all, DL_F32, recv, DL_BF16, (long)count, err);
}
