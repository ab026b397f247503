/* parse.h: the parsers of option values, one per kind of value, so that every
 * option of every subcommand accepts the same forms and rejects bad ones with
 * the same kind of message, naming the option and quoting the value:
 *   --keep: expected an integer in [1, 1000000], found 'x'
 * opt is the option as the user wrote it ("--bucket-bytes"); bad input is
 * DL_ERR_SPEC (exit status 2) and leaves *out unchanged. */
#ifndef DL_PARSE_H
#define DL_PARSE_H

#include <stddef.h>

#include "core/error.h"

/* A decimal integer in [min, max]: an optional '-' and digits, nothing else
 * (no spaces, no '+', no hexadecimal). */
int dl_parse_long(const char *opt, const char *text, long min, long max, long *out, struct dl_error *err);
int dl_parse_int(const char *opt, const char *text, int min, int max, int *out, struct dl_error *err);

/* A finite decimal number in [min, max] (as strtod reads it, without leading
 * spaces, infinities or NaN). */
int dl_parse_double(const char *opt, const char *text, double min, double max, double *out,
                    struct dl_error *err);

/* A size in bytes in [min, max], the grammar of GNU coreutils' sizes:
 * digits with an optional fraction, then an optional unit, letters in any case:
 *   none or B            bytes
 *   K, M, G, T           powers of 1024 (KiB, MiB, GiB, TiB mean the same)
 *   KB, MB, GB, TB       powers of 1000
 * so 25M = 25MiB = 26214400 and 25MB = 25000000.  The result must be a whole
 * number of bytes (1.5K = 1536 is one, 0.1K is not). */
int dl_parse_bytes(const char *opt, const char *text, size_t min, size_t max, size_t *out,
                   struct dl_error *err);

/* A time in seconds, greater than 0 and at most max: a number (as
 * dl_parse_double) with an optional unit s, m or h (90, 90s, 1.5m, 2h). */
int dl_parse_seconds(const char *opt, const char *text, double max, double *out, struct dl_error *err);

/* A short time in seconds, at least 0 and at most max: a number (as
 * dl_parse_double) with a unit ns, us, ms or s (20us, 5ms, 0.1s; a bare 0
 * is 0).  For latencies, where a number without its unit is a mistake. */
int dl_parse_duration(const char *opt, const char *text, double max, double *out, struct dl_error *err);

/* A rate in bytes per second, above 0: a size of dl_parse_bytes's grammar
 * followed by "/s" (1GB/s = 1e9, 12.5GB/s, 100MiB/s), or bits per second
 * with bit, Kbit, Mbit, Gbit or Tbit (powers of 1000) before "/s"
 * (100Gbit/s = 12.5e9 bytes per second). */
int dl_parse_rate(const char *opt, const char *text, double *out, struct dl_error *err);

/* A network link, one grammar for every option and file that describes one
 * (--comm-emulate, plan's --link and --node-link, machine files' links):
 * "alpha=TIME,bw=RATE" in any order, each once, alpha a latency of
 * dl_parse_duration (at most max_alpha seconds), bw a rate of
 * dl_parse_rate, and with allow_add an add=RATE (bytes reduced per
 * second).  At least one key; which ones a caller needs it checks itself
 * (has_*). */
#define DL_LINK_MAX_ALPHA 10.0 /* seconds: a latency above this is a mistake */
struct dl_link {
    double alpha, bw, add;
    int has_alpha, has_bw, has_add;
};
int dl_parse_link(const char *opt, const char *text, int allow_add, double max_alpha, struct dl_link *out,
                  struct dl_error *err);

/* bytes written for people, in the units dl_parse_bytes reads: "812 bytes",
 * "1.5 KiB", "98.3 MiB", "2.41 GiB", "1.20 TiB" (three significant digits
 * from KiB up); returns buf. */
const char *dl_bytes_str(double bytes, char *buf, size_t size);

#endif
