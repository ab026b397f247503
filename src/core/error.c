/* error.c: formatting of struct dl_error messages, user values shortened for
 * them, and checked allocation. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dl_errorf(struct dl_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

void dl_error_prefix(struct dl_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
}

struct dl_short dl_short(const char *value)
{
    struct dl_short out;
    size_t head = 0, chars = 0;
    for (const unsigned char *p = (const unsigned char *)value; *p; p++)
        if ((*p & 0xC0) != 0x80 && ++chars == DL_SHORT_HEAD + 1)
            head = (size_t)(p - (const unsigned char *)value); /* the bytes of the first DL_SHORT_HEAD */
    if (chars <= DL_SHORT_MAX)
        snprintf(out.s, sizeof out.s, "%s", value);
    else
        snprintf(out.s, sizeof out.s, "%.*s... (%zu characters)", (int)head, value, chars);
    return out;
}

void *dl_calloc(size_t n, size_t size, struct dl_error *err)
{
    if (n == 0 || size == 0)
        n = size = 1;
    void *p = calloc(n, size);
    if (!p)
        dl_errorf(err, DL_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

char *dl_strdup(const char *s, struct dl_error *err)
{
    size_t n = strlen(s) + 1;
    char *p = dl_calloc(n, 1, err);
    if (p)
        memcpy(p, s, n);
    return p;
}
