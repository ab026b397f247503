/* fuzz_replay.c: replays the inputs of one fuzz target without libFuzzer, as
 * a normal `make check` test (linked with fuzz/fuzz_<FUZZ_TARGET>.c): every
 * crash a fuzzer ever found (tests/fuzz-regressions/<target>/) and every seed
 * (fuzz/corpus/<target>/) must run through cleanly; in the sanitizer build
 * that also means no memory error and no leak.  One TAP line per file. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every file of dir; returns the number run, -1 on a read error. */
static int replay_dir(const char *dir, int *n)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    char *names[4096];
    int count = 0;
    struct dirent *de;
    while ((de = readdir(d)) && count < 4096)
        if (de->d_name[0] != '.')
            names[count++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)count, sizeof names[0], by_name);
    int bad = 0;
    for (int i = 0; i < count; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        unsigned char *buf = NULL;
        long size = -1;
        if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
            (buf = malloc((size_t)size + 1)) && fread(buf, 1, (size_t)size, f) == (size_t)size) {
            printf("# %s (%ld bytes)\n", path, size);
            fflush(stdout);
            LLVMFuzzerTestOneInput(buf, (size_t)size);
            printf("ok %d - %s replays cleanly\n", ++*n, names[i]);
        } else {
            printf("not ok %d - %s cannot be read\n", ++*n, names[i]);
            bad = 1;
        }
        if (f)
            fclose(f);
        free(buf);
        free(names[i]);
    }
    return bad ? -1 : count;
}

int main(void)
{
    const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
    char regress[1024], corpus[1024];
    snprintf(regress, sizeof regress, "%s/tests/fuzz-regressions/%s", top, FUZZ_TARGET);
    snprintf(corpus, sizeof corpus, "%s/fuzz/corpus/%s", top, FUZZ_TARGET);
    int n = 0;
    int a = replay_dir(regress, &n), b = replay_dir(corpus, &n);
    if (n == 0) {
        printf("1..0 # SKIP no inputs in %s or %s\n", regress, corpus);
        return 0;
    }
    printf("1..%d\n", n);
    return a < 0 || b < 0;
}
