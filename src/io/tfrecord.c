/* tfrecord.c: TFRecord framing with ISA-L's CRC-32C (see tfrecord.h). */
#include "io/tfrecord.h"

#include <isa-l/crc.h>
#include <limits.h>

uint32_t dl_crc32c(const void *data, size_t n)
{
    /* ISA-L's crc32_iscsi takes the register's start value and returns it
     * without the final inversion; it counts in int, so long data goes in
     * pieces, each continuing the register. */
    uint32_t reg = 0xffffffffu;
    const unsigned char *p = data;
    while (n > 0) {
        int piece = n > (size_t)INT_MAX ? INT_MAX : (int)n;
        reg = crc32_iscsi((unsigned char *)p, piece, reg);
        p += piece;
        n -= (size_t)piece;
    }
    return ~reg;
}

uint32_t dl_tfrecord_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static void put_le(unsigned char *out, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        out[i] = (unsigned char)(v >> (8 * i));
}

int dl_tfrecord_write(FILE *f, const void *data, size_t n)
{
    unsigned char head[12], tail[4];
    put_le(head, (uint64_t)n, 8);
    put_le(head + 8, dl_tfrecord_mask(dl_crc32c(head, 8)), 4);
    put_le(tail, dl_tfrecord_mask(dl_crc32c(data, n)), 4);
    if (fwrite(head, 1, sizeof head, f) != sizeof head || (n && fwrite(data, 1, n, f) != n) ||
        fwrite(tail, 1, sizeof tail, f) != sizeof tail)
        return -1;
    return 0;
}
