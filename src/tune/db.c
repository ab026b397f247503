/* db.c: the persistent tuning database, one SQLite file shared by every
 * process on the machine (concurrent jobs, MPI ranks): WAL journal, a busy
 * timeout and short transactions make concurrent readers and writers safe;
 * an advisory lock on FILE.lock lets one process measure while the others
 * wait, then read what it stored instead of measuring again.  Raw
 * measurements are stored, never plans: plans are cheap to recompute. */
#include "tune/tune_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/folders.h"

#define BUSY_TIMEOUT_MS 120000

struct dl_tune_db {
    sqlite3 *db;
    sqlite3_stmt *get, *put;
    int lock_fd;
    char lock_path[1100];
};

/* measurement_v2: the key has the kernel's dtype.  A file of the first
 * schema (table measurement, no dtype) is carried over once by
 * carry_over(): its kernels' names said their dtype (-bf16). */
static const char schema[] =
    "CREATE TABLE IF NOT EXISTS measurement_v2 ("
    " op TEXT NOT NULL, direction INTEGER NOT NULL, mb INTEGER NOT NULL, kernel TEXT NOT NULL, dtype TEXT NOT NULL,"
    " versions TEXT NOT NULL, device TEXT NOT NULL, threads INTEGER NOT NULL,"
    " time_s REAL, workspace INTEGER NOT NULL, saved INTEGER NOT NULL, measured_at INTEGER NOT NULL,"
    " PRIMARY KEY (op, direction, mb, kernel, dtype, versions, device, threads));";

static const char carry_over_rows[] =
    "INSERT OR IGNORE INTO measurement_v2 SELECT op, direction, mb, kernel,"
    " CASE WHEN kernel LIKE '%-bf16' THEN 'bf16' ELSE 'f32' END, versions, device, threads, time_s, workspace,"
    " saved, measured_at FROM measurement; DROP TABLE measurement;";

/* 1 when the file still has the first schema's table. */
static int has_old_table(sqlite3 *db)
{
    sqlite3_stmt *s = NULL;
    int found = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='measurement'", -1, &s,
                           NULL) == SQLITE_OK)
        found = sqlite3_step(s) == SQLITE_ROW;
    sqlite3_finalize(s);
    return found;
}

/* Moves the first schema's rows into measurement_v2, in one transaction
 * (another process opening the file at the same time finds it done). */
static int carry_over(sqlite3 *db)
{
    if (!has_old_table(db))
        return SQLITE_OK;
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    if (has_old_table(db))
        rc = sqlite3_exec(db, carry_over_rows, NULL, NULL, NULL);
    return sqlite3_exec(db, rc == SQLITE_OK ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK ? rc
                                                                                                  : SQLITE_ERROR;
}

static int db_error(struct dl_tune_db *d, struct dl_error *err, const char *what)
{
    return dl_errorf(err, DL_ERR_IO, "tuning database: %s: %s", what, d->db ? sqlite3_errmsg(d->db) : "no handle");
}

int dl_tune_db_default_path(char *buf, size_t size, struct dl_error *err)
{
    const char *own = getenv("DLTRAIN_TUNE_DB"), *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (own && *own)
        snprintf(buf, size, "%s", own);
    else if (x && *x == '/')
        snprintf(buf, size, "%s/dltrain/tune.sqlite", x);
    else if (home && *home)
        snprintf(buf, size, "%s/.cache/dltrain/tune.sqlite", home);
    else
        return dl_errorf(err, DL_ERR_IO, "tuning database: neither XDG_CACHE_HOME nor HOME is set (use --tune-db FILE)");
    return DL_OK;
}

/* Turns a new file's journal into WAL (a no-op once it is).  The switch
 * needs an exclusive lock, and SQLite answers SQLITE_BUSY at once, without
 * the busy handler, while another process that opened the new file at the
 * same moment holds a shared one: retry for as long as the busy timeout. */
static int set_wal(sqlite3 *db)
{
    int rc;
    for (int waited_ms = 0; (rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL;", NULL, NULL, NULL)) == SQLITE_BUSY &&
                            waited_ms < BUSY_TIMEOUT_MS;
         waited_ms += 10)
        sqlite3_sleep(10);
    return rc;
}

int dl_tune_db_open(struct dl_tune_db **out, const char *path, struct dl_error *err)
{
    char def[1024];
    if (!path) {
        int rc = dl_tune_db_default_path(def, sizeof def, err);
        if (rc)
            return rc;
        path = def;
    }
    if (strlen(path) >= 1024)
        return dl_errorf(err, DL_ERR_IO, "tuning database: path too long");
    if (strcmp(path, "none") == 0)
        return dl_errorf(err, DL_ERR_SPEC, "--tune-db none (the built-in kernel table) holds no measurements: "
                         "measuring needs a database file");
    int rc = dl_make_parents(path, err);
    if (rc) {
        dl_error_prefix(err, "tuning database");
        return rc;
    }
    struct dl_tune_db *d = dl_calloc(1, sizeof *d, err);
    if (!d)
        return DL_ERR_NOMEM;
    d->lock_fd = -1;
    snprintf(d->lock_path, sizeof d->lock_path, "%s.lock", path);
    rc = DL_OK;
    if (sqlite3_open_v2(path, &d->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK)
        rc = db_error(d, err, path);
    if (!rc) {
        sqlite3_busy_timeout(d->db, BUSY_TIMEOUT_MS); /* a writer holds the lock for one short transaction */
        if (set_wal(d->db) != SQLITE_OK ||
            sqlite3_exec(d->db, "PRAGMA synchronous=NORMAL;", NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_exec(d->db, schema, NULL, NULL, NULL) != SQLITE_OK || carry_over(d->db) != SQLITE_OK)
            rc = db_error(d, err, path);
    }
    if (!rc && (sqlite3_prepare_v2(d->db,
                                   "SELECT time_s, workspace, saved FROM measurement_v2 WHERE op=?1 AND direction=?2 "
                                   "AND mb=?3 AND kernel=?4 AND versions=?5 AND device=?6 AND threads=?7 AND dtype=?8",
                                   -1, &d->get, NULL) != SQLITE_OK ||
                sqlite3_prepare_v2(d->db,
                                   "INSERT OR REPLACE INTO measurement_v2 (op, direction, mb, kernel, versions, device, "
                                   "threads, dtype, time_s, workspace, saved, measured_at) "
                                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, strftime('%s','now'))",
                                   -1, &d->put, NULL) != SQLITE_OK))
        rc = db_error(d, err, "prepare");
    if (rc) {
        dl_error_prefix(err, "%s", path);
        dl_tune_db_close(d);
        return rc;
    }
    *out = d;
    return DL_OK;
}

void dl_tune_db_close(struct dl_tune_db *d)
{
    if (!d)
        return;
    dl_tune_db_unlock(d);
    sqlite3_finalize(d->get);
    sqlite3_finalize(d->put);
    sqlite3_close(d->db);
    free(d);
}

static void bind_key(sqlite3_stmt *s, const struct dl_tune_key *k)
{
    sqlite3_bind_text(s, 1, k->op, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, k->dir);
    sqlite3_bind_int(s, 3, k->mb);
    sqlite3_bind_text(s, 4, k->kernel, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, k->versions, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, k->device, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 7, k->threads);
    sqlite3_bind_text(s, 8, k->dtype ? k->dtype : "f32", -1, SQLITE_STATIC);
}

int dl_tune_db_get(struct dl_tune_db *d, const struct dl_tune_key *k, struct dl_tune_row *r, struct dl_error *err)
{
    sqlite3_reset(d->get);
    bind_key(d->get, k);
    int st = sqlite3_step(d->get), found = 0;
    if (st == SQLITE_ROW) {
        r->time_s = sqlite3_column_type(d->get, 0) == SQLITE_NULL ? NAN : sqlite3_column_double(d->get, 0);
        r->ws = (size_t)sqlite3_column_int64(d->get, 1);
        r->saved = (size_t)sqlite3_column_int64(d->get, 2);
        found = 1;
    } else if (st != SQLITE_DONE) {
        found = -db_error(d, err, "read");
    }
    sqlite3_reset(d->get);
    return found;
}

int dl_tune_db_put(struct dl_tune_db *d, const struct dl_tune_key *k, const struct dl_tune_row *r,
                   struct dl_error *err)
{
    sqlite3_reset(d->put);
    bind_key(d->put, k);
    if (isnan(r->time_s))
        sqlite3_bind_null(d->put, 9);
    else
        sqlite3_bind_double(d->put, 9, r->time_s);
    sqlite3_bind_int64(d->put, 10, (sqlite3_int64)r->ws);
    sqlite3_bind_int64(d->put, 11, (sqlite3_int64)r->saved);
    int st = sqlite3_step(d->put);
    sqlite3_reset(d->put);
    return st == SQLITE_DONE ? DL_OK : db_error(d, err, "write");
}

int dl_tune_db_begin(struct dl_tune_db *d, struct dl_error *err)
{
    return sqlite3_exec(d->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK ? DL_OK : db_error(d, err, "begin");
}

int dl_tune_db_commit(struct dl_tune_db *d, struct dl_error *err)
{
    return sqlite3_exec(d->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? DL_OK : db_error(d, err, "commit");
}

int dl_tune_db_lock(struct dl_tune_db *d, struct dl_error *err)
{
    if (d->lock_fd >= 0)
        return DL_OK;
    d->lock_fd = open(d->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (d->lock_fd < 0)
        return dl_errorf(err, DL_ERR_IO, "tuning database: cannot open %s: %s", d->lock_path, strerror(errno));
    while (flock(d->lock_fd, LOCK_EX) != 0)
        if (errno != EINTR) {
            int e = errno;
            close(d->lock_fd);
            d->lock_fd = -1;
            return dl_errorf(err, DL_ERR_IO, "tuning database: cannot lock %s: %s", d->lock_path, strerror(e));
        }
    return DL_OK;
}

void dl_tune_db_unlock(struct dl_tune_db *d)
{
    if (d->lock_fd < 0)
        return;
    flock(d->lock_fd, LOCK_UN);
    close(d->lock_fd);
    d->lock_fd = -1;
}
