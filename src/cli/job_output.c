/* job_output.c: stderr captured in a memory file while every rank reads
 * the same inputs, and printed once (see job_output.h). */
#include "cli/job_output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void dl_job_output_capture(struct dl_job_output *o)
{
    o->saved_fd = o->capture_fd = -1;
    if (!dl_comm_launched_in_parallel())
        return;
    int fd = memfd_create("dltrain-stderr", MFD_CLOEXEC);
    if (fd < 0)
        return; /* then every rank prints, as without a launcher */
    fflush(stderr);
    o->saved_fd = dup(STDERR_FILENO);
    if (o->saved_fd < 0 || dup2(fd, STDERR_FILENO) < 0) {
        if (o->saved_fd >= 0)
            close(o->saved_fd);
        close(fd);
        o->saved_fd = -1;
        return;
    }
    o->capture_fd = fd;
}

char *dl_job_output_release(struct dl_job_output *o)
{
    if (o->saved_fd < 0)
        return NULL;
    fflush(stderr);
    dup2(o->saved_fd, STDERR_FILENO);
    close(o->saved_fd);
    o->saved_fd = -1;
    off_t n = lseek(o->capture_fd, 0, SEEK_END);
    char *text = malloc(n > 0 ? (size_t)n + 1 : 1);
    size_t got = 0;
    if (text && n > 0 && lseek(o->capture_fd, 0, SEEK_SET) == 0)
        while (got < (size_t)n) {
            ssize_t r = read(o->capture_fd, text + got, (size_t)n - got);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
    if (text)
        text[got] = '\0';
    close(o->capture_fd);
    o->capture_fd = -1;
    return text;
}

void dl_job_output_print(const char *text, int rank, const struct dl_agreement *a)
{
    if (!text || !a->print)
        return;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        int len = end ? (int)(end - line) : (int)strlen(line);
        const char *colon = a->named ? strstr(line, ": ") : NULL;
        /* "PROG: rest" names the rank after PROG: (a program name has no spaces) */
        if (colon && colon < line + len && !memchr(line, ' ', (size_t)(colon - line)))
            fprintf(stderr, "%.*s: rank %d: %.*s\n", (int)(colon - line), line, rank, (int)(line + len - colon - 2),
                    colon + 2);
        else if (a->named)
            fprintf(stderr, "rank %d: %.*s\n", rank, len, line);
        else
            fprintf(stderr, "%.*s\n", len, line);
        line += len + (end ? 1 : 0);
    }
    fflush(stderr);
}
