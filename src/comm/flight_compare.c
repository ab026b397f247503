/* flight_compare.c: the flight recorder's post-mortem (see flight.h):
 * every rank's record asked for, read back and compared group by group. */
#include "comm/flight.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"

/* A rank's calls in one group, from its file. */
struct seen {
    json_t *calls; /* its lines of that group, in order (borrowed from the file's array) */
    long last;     /* the highest sequence number it entered (0: none) */
};

/* Where this group's ranks got to: the first call some of them entered and
 * others never did (or entered as another call) into buf; 1 when found. */
static int compare_group(json_t *const *files, int world, const char *name, const char *thread, json_t *ranks,
                         char *buf, size_t size)
{
    int n = (int)json_array_size(ranks);
    struct seen *s = calloc((size_t)n, sizeof *s);
    long first = 1, top = 0;
    int found = 0;
    for (int k = 0; s && k < n; k++) {
        int r = (int)json_integer_value(json_array_get(ranks, (size_t)k));
        json_t *lines = r >= 0 && r < world ? files[r] : NULL;
        s[k].calls = json_array();
        size_t i;
        json_t *c;
        long low = -1;
        json_array_foreach(lines, i, c) {
            const char *g = json_string_value(json_object_get(c, "group")),
                       *t = json_string_value(json_object_get(c, "thread"));
            if (!g || strcmp(g, name) || !t || strcmp(t, thread) || json_integer_value(json_object_get(c, "seq")) < 1)
                continue; /* another group's or thread's, or a message to one peer */
            json_array_append(s[k].calls, c);
            long q = (long)json_integer_value(json_object_get(c, "seq"));
            s[k].last = q > s[k].last ? q : s[k].last;
            low = low < 0 || q < low ? q : low;
        }
        first = low > first ? low : first; /* older calls are out of some ring */
        top = s[k].last > top ? s[k].last : top;
    }
    for (long q = first; s && q <= top && !found; q++) {
        json_t *at = NULL;
        char in[160] = "", out[160] = "";
        size_t ui = 0, uo = 0;
        for (int k = 0; k < n; k++) {
            int r = (int)json_integer_value(json_array_get(ranks, (size_t)k));
            json_t *mine = NULL, *c;
            size_t i;
            json_array_foreach(s[k].calls, i, c) if (json_integer_value(json_object_get(c, "seq")) == q) mine = c;
            if (!files[r] || (!mine && s[k].last < q)) {
                uo += (size_t)snprintf(out + uo, uo < sizeof out ? sizeof out - uo : 0, "%s%d", uo ? ", " : "", r);
                continue;
            }
            if (!mine)
                continue;
            /* (labels may differ: a sum over pipeline stages is made after each stage's own layers) */
            if (at && strcmp(json_string_value(json_object_get(mine, "call")), json_string_value(json_object_get(at, "call")))) {
                snprintf(buf, size, "the %s group disagrees at its %s collective #%ld: rank %d entered a %s (%s) where "
                         "others entered a %s (%s)", name, thread, q, r, json_string_value(json_object_get(mine, "call")),
                         json_string_value(json_object_get(mine, "label")), json_string_value(json_object_get(at, "call")),
                         json_string_value(json_object_get(at, "label")));
                found = 1;
                break;
            }
            at = at ? at : mine;
            ui += (size_t)snprintf(in + ui, ui < sizeof in ? sizeof in - ui : 0, "%s%d", ui ? ", " : "", r);
        }
        if (!found && at && uo) {
            snprintf(buf, size, "in the %s group, rank%s %s entered %s collective #%ld (%s, %lld bytes, %s) in "
                     "step %lld, and rank%s %s never did", name, strchr(in, ',') ? "s" : "", in, thread, q,
                     json_string_value(json_object_get(at, "call")), json_integer_value(json_object_get(at, "bytes")),
                     *json_string_value(json_object_get(at, "label")) ? json_string_value(json_object_get(at, "label"))
                                                                      : "no label",
                     json_integer_value(json_object_get(at, "step")), strchr(out, ',') ? "s" : "", out);
            found = 1;
        }
    }
    for (int k = 0; s && k < n; k++)
        json_decref(s[k].calls);
    free(s);
    return found;
}

/* When path was last written (seconds; -1: it is not there). */
static double modified(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec : -1;
}

/* Rank r's file, written since `asked`, as an array of its lines (NULL:
 * none, an older one, or unreadable), its header into *head. */
static json_t *read_record(const char *dir, int r, double asked, json_t **head)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/flight-rank%05d.jsonl", dir, r);
    FILE *in = modified(path) >= asked ? fopen(path, "r") : NULL;
    if (!in)
        return NULL;
    json_t *lines = json_array();
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, in) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        if (o && json_object_get(o, "groups") && !*head)
            *head = json_incref(o);
        else if (o)
            json_array_append(lines, o);
        json_decref(o);
    }
    free(line);
    fclose(in);
    return lines;
}

void dl_flight_post_mortem(struct dl_flight *f, double wait_s, char *buf, size_t size)
{
    buf[0] = '\0';
    if (!f)
        return;
    char dir[1024], request[1100];
    snprintf(dir, sizeof dir, "%s", dl_flight_dir(f));
    snprintf(request, sizeof request, "%s/dump-request", dir);
    struct dl_error err = {0};
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(buf, size, "no flight record: %s: %s", dir, strerror(errno));
        return;
    }
    FILE *touch = fopen(request, "w"); /* the request first: records older than it are another run's */
    if (touch)
        fclose(touch);
    double asked = modified(request);
    if (dl_flight_dump(f, &err)) {
        snprintf(buf, size, "no flight record: %s", err.msg);
        return;
    }
    int world = dl_flight_world(f), have = 0;
    if (world < 1 || world > (1 << 20))
        world = 1;
    for (double t0 = dl_clock_now(); have < world && dl_clock_now() - t0 < wait_s; usleep(100000)) {
        have = 0;
        for (int r = 0; r < world; r++) {
            char path[1100];
            snprintf(path, sizeof path, "%s/flight-rank%05d.jsonl", dir, r);
            have += modified(path) >= asked;
        }
    }
    json_t **files = calloc((size_t)(unsigned)world, sizeof *files), *groups = json_object(); /* "name ranks": ranks */
    for (int r = 0; files && r < world; r++) { /* every rank's groups, each once */
        json_t *head = NULL, *g;
        files[r] = read_record(dir, r, asked, &head);
        size_t i;
        json_array_foreach(json_object_get(head, "groups"), i, g) {
            char *key = json_dumps(g, JSON_COMPACT | JSON_SORT_KEYS);
            if (key)
                json_object_set(groups, key, g);
            free(key);
        }
        json_decref(head);
    }
    int found = 0;
    const char *key;
    json_t *g;
    static const char *const threads[] = {"main", "gradients"};
    json_object_foreach(groups, key, g) for (int t = 0; t < 2 && !found && files; t++)
        found = compare_group(files, world, json_string_value(json_object_get(g, "group")), threads[t],
                              json_object_get(g, "ranks"), buf, size);
    size_t used = strlen(buf);
    snprintf(buf + used, size - used, "%sflight records of %d of %d ranks in %s/flight-rank*.jsonl", found ? "; " : "",
             have, world, dir);
    for (int r = 0; files && r < world; r++)
        json_decref(files[r]);
    free(files);
    json_decref(groups);
}
