/* tfrecord.c: TFRecord framing with ISA-L's CRC-32C, records appended whole (see
 * tfrecord.h). */
#include "io/tfrecord.h"

#include <errno.h>
#include <isa-l/crc.h>
#include <limits.h>
#include <unistd.h>

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

int dl_tfrecord_append(int fd, unsigned char *rec, size_t n)
{
    put_le(rec, (uint64_t)n, 8);
    put_le(rec + 8, dl_tfrecord_mask(dl_crc32c(rec, 8)), 4);
    put_le(rec + 12 + n, dl_tfrecord_mask(dl_crc32c(rec + 12, n)), 4);
    off_t start = lseek(fd, 0, SEEK_CUR);
    if (start < 0)
        return -1;
    size_t done = 0, total = n + 16;
    while (done < total) {
        ssize_t w = write(fd, rec + done, total - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            if (ftruncate(fd, start) == 0) /* the file ends on the record before */
                lseek(fd, start, SEEK_SET);
            errno = e;
            return -1;
        }
        done += (size_t)w;
    }
    return 0;
}
