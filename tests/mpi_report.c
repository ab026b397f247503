/* mpi_report.c: see mpi_report.h. */
#include "mpi_report.h"

#include <stdio.h>

int mpi_report(struct dl_comm *world, int ok, const char *what, const char *detail)
{
    float bad = ok ? 0.0f : 1.0f;
    struct dl_error err;
    if (world->ops->allreduce(world, &bad, DL_F32, 1, &err) != DL_OK)
        bad = 1;
    if (world->rank == 0) {
        if (bad == 0)
            printf("ok - P=%d %s\n", world->size, what);
        else
            printf("not ok - P=%d %s%s%s (failed on %g ranks)\n", world->size, what, ok ? "" : ": ",
                   ok ? "" : detail, bad);
        fflush(stdout);
    } else if (!ok) {
        fprintf(stderr, "rank %d: %s: %s\n", world->rank, what, detail);
    }
    return bad == 0;
}
