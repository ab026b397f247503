/* utf8.c: UTF-8 repair (see utf8.h). */
#include "data/utf8.h"

#include <string.h>

/* The well-formed sequences (Unicode's table 3-7): how many bytes a lead
 * byte starts, and the range its second byte must fall in (the later ones are
 * 80..BF).  0: the byte cannot start a sequence. */
static int sequence(unsigned char b, unsigned char *lo, unsigned char *hi)
{
    *lo = 0x80, *hi = 0xBF;
    if (b < 0x80)
        return 1;
    if (b >= 0xC2 && b <= 0xDF)
        return 2;
    if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0)
            *lo = 0xA0;
        if (b == 0xED)
            *hi = 0x9F;
        return 3;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0)
            *lo = 0x90;
        if (b == 0xF4)
            *hi = 0x8F;
        return 4;
    }
    return 0;
}

size_t dl_utf8_repair(const unsigned char *in, size_t n, unsigned char *out, size_t *out_len)
{
    static const unsigned char fffd[3] = {0xEF, 0xBF, 0xBD};
    size_t i = 0, o = 0, replaced = 0;
    while (i < n) {
        unsigned char lo, hi;
        int len = sequence(in[i], &lo, &hi), ok = 1;
        if (len == 1) {
            out[o++] = in[i++];
            continue;
        }
        /* the longest prefix of a well-formed sequence starting at i */
        size_t j = 1;
        if (len == 0)
            ok = 0;
        for (; ok && j < (size_t)len; j++) {
            unsigned char b = i + j < n ? in[i + j] : 0;
            if (i + j >= n || b < (j == 1 ? lo : 0x80) || b > (j == 1 ? hi : 0xBF))
                ok = 0;
            if (!ok)
                break;
        }
        if (ok) {
            memcpy(out + o, in + i, (size_t)len);
            o += (size_t)len;
            i += (size_t)len;
        } else {
            memcpy(out + o, fffd, 3);
            o += 3;
            i += j;
            replaced++;
        }
    }
    *out_len = o;
    return replaced;
}
