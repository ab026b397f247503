/* error.h: status codes and the error struct every library call fills.
 *
 * Library code never prints or exits: it returns a status and writes a
 * human-readable message into a struct dl_error.  Only src/cli/ prints the
 * message and turns the status into the process exit code. */
#ifndef DL_ERROR_H
#define DL_ERROR_H

#include <stddef.h>

enum dl_status {
    DL_OK = 0,
    DL_ERR_INTERNAL = 1,  /* a bug: an invariant did not hold */
    DL_ERR_SPEC = 2,      /* bad network file or bad option value (exit status 2) */
    DL_ERR_IO = 3,        /* a file could not be read or written */
    DL_ERR_NOMEM = 4,     /* out of memory */
    DL_ERR_DATA = 5,      /* a dataset file is malformed */
    DL_ERR_COMM = 6,      /* communication failure */
    DL_ERR_UNSUPPORTED = 7 /* asked for something this build cannot do */
};

struct dl_error {
    int code;
    char msg[1024];
};

/* Formats msg, stores code and returns code, so callers can write
 * `return dl_errorf(err, DL_ERR_SPEC, "...", ...);`.  err may be NULL. */
int dl_errorf(struct dl_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to an existing message (for adding context such as a
 * file name or layer name as the error travels up). */
void dl_error_prefix(struct dl_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A user's value as a message quotes it: the value itself when it has at
 * most DL_SHORT_MAX characters, else its first DL_SHORT_HEAD characters
 * (cut between UTF-8 characters) and "... (N characters)", so that a long
 * --set value or path cannot push the reason out of msg.  The result lives
 * until the end of the full expression: dl_errorf(..., "found '%s'",
 * dl_short(text).s). */
#define DL_SHORT_MAX 100
#define DL_SHORT_HEAD 60
struct dl_short {
    char s[4 * DL_SHORT_MAX + 1];
};
struct dl_short dl_short(const char *value);

/* Allocation helpers that report DL_ERR_NOMEM through err.  They return NULL on
 * failure (and for a zero size, a valid pointer that must be freed). */
void *dl_calloc(size_t n, size_t size, struct dl_error *err);
char *dl_strdup(const char *s, struct dl_error *err);

#endif
