/* pages.c: pages handed back with madvise (see pages.h). */
#include "core/pages.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

void dl_pages_release(void *base, size_t lo, size_t hi, size_t keep_lo, size_t keep_hi)
{
    static uintptr_t page;
    if (!page)
        page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t at = (uintptr_t)base, p = page;
    uintptr_t a = (at + lo + p - 1) / p * p, b = (at + hi) / p * p;
    uintptr_t ka = (at + keep_lo) / p * p, kb = (at + keep_hi + p - 1) / p * p;
    uintptr_t cut[2][2] = {{a, b < ka ? b : ka}, {a > kb ? a : kb, b}};
    for (int k = 0; k < 2; k++)
        if (cut[k][0] < cut[k][1])
            (void)madvise((void *)cut[k][0], cut[k][1] - cut[k][0], MADV_DONTNEED);
}
