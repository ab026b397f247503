/* flight.c: the flight recorder (see flight.h). */
#include "comm/flight.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "comm/observed.h"
#include "core/clock.h"
#include "core/thread_label.h"

#define GROUPS 16

enum { LANES = 2 }; /* the thread a call came from: 0 the main one, 1 the gradients' (dl_flight_lane) */

struct call {
    int group, lane;
    long seq;        /* the collective's number in its group and lane; 0: a message to or from one peer */
    const char *what;
    size_t bytes;
    int peer;
    char label[48];
    long step;
    double t0, t1; /* t1 0: not returned */
};

struct group {
    const char *name;
    int size, *world_ranks;
    long seq[LANES];
    struct dl_flight *f;
};

struct dl_flight {
    char dir[1024];
    int rank, size;
    pthread_mutex_t mu;
    pthread_mutex_t dump_mu;    /* one dump at a time (the watcher's and a post-mortem's) */
    struct call ring[DL_FLIGHT_CALLS];
    long calls;                 /* recorded so far; ring[i % N] */
    struct group *groups[GROUPS];
    int n_groups;
    long step;
    double t_open;
    long stop_step;             /* testing aid */
    char stop_label[48];
    int stop_crash;             /* the testing aid's rank dies of SIGSEGV instead */
    pthread_t watcher;
    int watching;
    double answered;            /* the time of the request last answered (0: none); requests older than
                                   opened, a run before this one's, are not answered */
    time_t opened;
};

static struct dl_flight *global;
static _Thread_local int thread_lane, thread_depth; /* depth: inside a recorded collective (its messages not recorded) */

void dl_flight_lane(int lane)
{
    thread_lane = lane > 0 && lane < LANES ? lane : 0;
}

long dl_flight_step(struct dl_flight *f)
{
    pthread_mutex_lock(&f->mu);
    long step = f->step;
    pthread_mutex_unlock(&f->mu);
    return step;
}

struct dl_flight *dl_flight_global(void)
{
    return global;
}

const char *dl_flight_dir(const struct dl_flight *f)
{
    return f->dir;
}

int dl_flight_world(const struct dl_flight *f)
{
    return f->size;
}

int dl_flight_rank(const struct dl_flight *f)
{
    return f->rank;
}

void dl_flight_set_step(struct dl_flight *f, long step)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->step = step;
    pthread_mutex_unlock(&f->mu);
}

void dl_flight_stop_at(struct dl_flight *f, long step, const char *label, int crash)
{
    f->stop_crash = crash;
    f->stop_step = step;
    snprintf(f->stop_label, sizeof f->stop_label, "%s", label);
}

static long enter(void *ctx, const char *what, int peer, size_t bytes)
{
    struct group *g = ctx;
    struct dl_flight *f = g->f;
    if (thread_depth > 0) /* a message of an algorithm's collective, recorded as that */
        return -1;
    int collective = peer < 0 && strcmp(what, "message exchange") != 0;
    pthread_mutex_lock(&f->mu);
    int stop = f->stop_step > 0 && f->step == f->stop_step && !strcmp(dl_thread_label(), f->stop_label);
    pthread_mutex_unlock(&f->mu);
    if (stop && f->stop_crash) /* the testing aid: a rank that dies here */
        raise(SIGSEGV);
    while (stop) /* the testing aid: a rank that never enters this call */
        sleep(1);
    pthread_mutex_lock(&f->mu);
    long id = f->calls++;
    struct call *c = &f->ring[id % DL_FLIGHT_CALLS];
    int index = 0;
    while (index < f->n_groups && f->groups[index] != g)
        index++;
    *c = (struct call){index, thread_lane, collective ? ++g->seq[thread_lane] : 0, what, bytes, peer, "", f->step,
                       dl_clock_now() - f->t_open, 0};
    snprintf(c->label, sizeof c->label, "%s", dl_thread_label());
    pthread_mutex_unlock(&f->mu);
    return id;
}

static void leave(void *ctx, long id)
{
    struct dl_flight *f = ((struct group *)ctx)->f;
    if (id < 0)
        return;
    pthread_mutex_lock(&f->mu);
    if (f->calls - id <= DL_FLIGHT_CALLS)
        f->ring[id % DL_FLIGHT_CALLS].t1 = dl_clock_now() - f->t_open;
    pthread_mutex_unlock(&f->mu);
}

static const struct dl_comm_observer recording = {enter, leave, NULL};

long dl_flight_begin(struct dl_comm *c, const char *call, size_t bytes)
{
    void *g = dl_comm_observer_ctx(c, &recording);
    long id = g ? enter(g, call, -1, bytes) : -1;
    thread_depth++;
    return id;
}

void dl_flight_end(struct dl_comm *c, long id)
{
    thread_depth--;
    void *g = dl_comm_observer_ctx(c, &recording);
    if (g)
        leave(g, id);
}

int dl_flight_record(struct dl_comm **c, struct dl_flight *f, const char *group, const int *world_ranks, int owns,
                     struct dl_error *err)
{
    if (f->n_groups == GROUPS)
        return dl_errorf(err, DL_ERR_INTERNAL, "the flight recorder records at most %d groups", GROUPS);
    struct group *g = dl_calloc(1, sizeof *g, err);
    int *ranks = g ? dl_calloc((size_t)(*c)->size, sizeof *ranks, err) : NULL;
    if (!ranks) {
        free(g);
        return DL_ERR_NOMEM;
    }
    memcpy(ranks, world_ranks, sizeof *ranks * (size_t)(*c)->size);
    *g = (struct group){group, (*c)->size, ranks, {0, 0}, f};
    int rc = dl_comm_observe(c, &recording, g, owns, err);
    if (rc) {
        free(ranks);
        free(g);
        return rc;
    }
    pthread_mutex_lock(&f->mu);
    f->groups[f->n_groups++] = g;
    pthread_mutex_unlock(&f->mu);
    return DL_OK;
}

/* Rank r's record file, or (r < 0) the file `what` in the folder. */
static void path_of(const struct dl_flight *f, int rank, const char *what, char *buf, size_t size)
{
    if (rank < 0)
        snprintf(buf, size, "%s/%s", f->dir, what);
    else
        snprintf(buf, size, "%s/flight-rank%05d.jsonl", f->dir, rank);
}

static int dump(struct dl_flight *f, const char *fatal, struct dl_error *err);

int dl_flight_dump(struct dl_flight *f, struct dl_error *err)
{
    pthread_mutex_lock(&f->dump_mu);
    int rc = dump(f, NULL, err);
    pthread_mutex_unlock(&f->dump_mu);
    return rc;
}

int dl_flight_dump_fatal(struct dl_flight *f, const char *fatal)
{
    struct dl_error err;
    int mine = pthread_mutex_trylock(&f->dump_mu) == 0; /* a watcher's dump in progress: written over it */
    int rc = dump(f, fatal, &err);
    if (mine)
        pthread_mutex_unlock(&f->dump_mu);
    return rc;
}

/* fatal: the signal a fatal-signal handler caught (the header's "fatal"),
 * or NULL. */
static int dump(struct dl_flight *f, const char *fatal, struct dl_error *err)
{
    char path[1100], tmp[1120];
    path_of(f, f->rank, NULL, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.partial", path);
    if (mkdir(f->dir, 0777) != 0 && errno != EEXIST)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot create the flight records' folder: %s", f->dir, strerror(errno));
    FILE *out = fopen(tmp, "w");
    if (!out)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
    pthread_mutex_lock(&f->mu);
    json_t *head = json_pack("{s:i, s:i, s:I, s:[]}", "rank", f->rank, "world", f->size, "step", (json_int_t)f->step,
                             "groups");
    if (head && fatal)
        json_object_set_new(head, "fatal", json_string(fatal));
    for (int i = 0; head && i < f->n_groups; i++) {
        json_t *ranks = json_array();
        for (int k = 0; k < f->groups[i]->size; k++)
            json_array_append_new(ranks, json_integer(f->groups[i]->world_ranks[k]));
        json_array_append_new(json_object_get(head, "groups"),
                              json_pack("{s:s, s:o}", "group", f->groups[i]->name, "ranks", ranks));
    }
    char *text = head ? json_dumps(head, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (text)
        fprintf(out, "%s\n", text);
    free(text);
    json_decref(head);
    long first = f->calls > DL_FLIGHT_CALLS ? f->calls - DL_FLIGHT_CALLS : 0;
    for (long id = first; id < f->calls; id++) {
        const struct call *c = &f->ring[id % DL_FLIGHT_CALLS];
        json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:I, s:i, s:s, s:I, s:f, s:o}", "group",
                              f->groups[c->group]->name, "thread", c->lane ? "gradients" : "main", "seq",
                              (json_int_t)c->seq, "call", c->what, "bytes", (json_int_t)c->bytes, "peer", c->peer,
                              "label", c->label, "step", (json_int_t)c->step, "start_s", c->t0, "end_s",
                              c->t1 > 0 ? json_real(c->t1) : json_null());
        char *line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        if (line)
            fprintf(out, "%s\n", line);
        free(line);
        json_decref(o);
    }
    pthread_mutex_unlock(&f->mu);
    int bad = ferror(out);
    bad |= fclose(out) != 0;
    if (bad || rename(tmp, path) != 0)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot write the flight record", path);
    return DL_OK;
}

/* The watcher: when a request file newer than the recorder appears (or
 * is made again), this rank's record is written. */
static void *watch(void *arg)
{
    struct dl_flight *f = arg;
    char request[1100];
    path_of(f, -1, "dump-request", request, sizeof request);
    for (;;) {
        pthread_mutex_lock(&f->mu);
        int go = f->watching;
        double answered = f->answered;
        pthread_mutex_unlock(&f->mu);
        if (!go)
            return NULL;
        struct stat st;
        double made = stat(request, &st) == 0 ? (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec : 0;
        if (made > 0 && st.st_mtim.tv_sec >= f->opened && made != answered) {
            struct dl_error err = {0};
            dl_flight_dump(f, &err);
            pthread_mutex_lock(&f->mu);
            f->answered = made;
            pthread_mutex_unlock(&f->mu);
        }
        usleep(100000);
    }
}

int dl_flight_open(const char *dir, int rank, int size, struct dl_flight **out, struct dl_error *err)
{
    struct dl_flight *f = dl_calloc(1, sizeof *f, err);
    if (!f)
        return DL_ERR_NOMEM;
    snprintf(f->dir, sizeof f->dir, "%s", dir);
    f->rank = rank, f->size = size, f->t_open = dl_clock_now(), f->watching = 1, f->opened = time(NULL);
    pthread_mutex_init(&f->mu, NULL);
    pthread_mutex_init(&f->dump_mu, NULL);
    dl_flight_fatal_install();
    if (pthread_create(&f->watcher, NULL, watch, f) != 0) {
        pthread_mutex_destroy(&f->mu);
        pthread_mutex_destroy(&f->dump_mu);
        free(f);
        return dl_errorf(err, DL_ERR_INTERNAL, "cannot start the flight recorder's thread");
    }
    global = f;
    *out = f;
    return DL_OK;
}

void dl_flight_close(struct dl_flight *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->watching = 0;
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->watcher, NULL);
    if (global == f)
        global = NULL;
    for (int i = 0; i < f->n_groups; i++) { /* their communicators are closed by now */
        free(f->groups[i]->world_ranks);
        free(f->groups[i]);
    }
    pthread_mutex_destroy(&f->mu);
    pthread_mutex_destroy(&f->dump_mu);
    free(f);
}
