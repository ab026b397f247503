/* utf8.h: repairing text that is not valid UTF-8 the way Python's
 * bytes.decode('utf-8', errors='replace') does: every maximal subpart of an
 * ill-formed sequence (Unicode 15, section 3.9, "U+FFFD Substitution of
 * Maximal Subparts") becomes one U+FFFD; a lone surrogate's encoding
 * (ED A0..BF xx) is ill-formed, so it becomes one U+FFFD per byte. */
#ifndef DL_DATA_UTF8_H
#define DL_DATA_UTF8_H

#include <stddef.h>

/* Writes in[0..n) with each ill-formed subpart replaced by EF BF BD into out
 * (room for 3 * n bytes: a replaced byte grows to 3); *out_len gets its
 * length.  Returns the number of replacements. */
size_t dl_utf8_repair(const unsigned char *in, size_t n, unsigned char *out, size_t *out_len);

#endif
