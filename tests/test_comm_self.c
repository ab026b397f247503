/* test_comm_self.c: the one-process backend (send-to-self queue, errors
 * instead of hangs, collectives as copies, split), the backend registry, the
 * allreduce registry on one rank, and the cost model's formulas and cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/allreduce.h"
#include "comm/comm.h"
#include "comm/costmodel.h"

static struct dl_comm *open_self(void)
{
    struct dl_comm *c = NULL;
    struct dl_error err;
    assert_int_equal(dl_comm_open("self", NULL, NULL, &c, &err), DL_OK);
    assert_non_null(c);
    assert_int_equal(c->rank, 0);
    assert_int_equal(c->size, 1);
    assert_string_equal(c->ops->name, "self");
    return c;
}

static void registry_picks_and_rejects(void **state)
{
    (void)state;
    struct dl_comm *c = NULL;
    struct dl_error err;
    assert_true(dl_comm_available("self"));
    assert_non_null(strstr(dl_comm_backends(), "self"));
    assert_int_equal(dl_comm_open("carrier-pigeon", NULL, NULL, &c, &err), DL_ERR_SPEC);
    assert_null(c);
    assert_non_null(strstr(err.msg, "carrier-pigeon"));
    if (!dl_comm_available("nccl")) {
        assert_int_equal(dl_comm_open("nccl", NULL, NULL, &c, &err), DL_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "--with-cuda"));
    } else { /* a --with-cuda build: without a GPU (or driver) it says so instead of failing later */
        int rc = dl_comm_open("nccl", NULL, NULL, &c, &err);
        if (rc == DL_OK)
            dl_comm_close(c);
        else {
            print_message("# nccl: %s\n", err.msg);
            assert_int_equal(rc, DL_ERR_UNSUPPORTED);
            assert_non_null(strstr(err.msg, "no CUDA device"));
        }
        c = NULL;
    }
    /* auto without a launcher is self (the harness does not run us under mpirun) */
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMIX_RANK");
    unsetenv("PMI_SIZE");
    unsetenv("SLURM_STEP_ID");
    unsetenv("DLTRAIN_COMM");
    assert_int_equal(dl_comm_open("auto", NULL, NULL, &c, &err), DL_OK);
    assert_string_equal(c->ops->name, "self");
    dl_comm_close(c);
    setenv("DLTRAIN_COMM", "self", 1);
    assert_int_equal(dl_comm_open(NULL, NULL, NULL, &c, &err), DL_OK);
    assert_string_equal(c->ops->name, "self");
    dl_comm_close(c);
    unsetenv("DLTRAIN_COMM");
    dl_comm_close(NULL);
}

static void send_to_self_through_the_queue(void **state)
{
    (void)state;
    struct dl_comm *c = open_self();
    struct dl_error err;
    int a = 1, b = 2, got = 0, got2 = 0;
    /* send first, then receive: the data was copied at the send */
    assert_int_equal(c->ops->send(c, &a, sizeof a, 0, 7, &err), DL_OK);
    a = 99;
    assert_int_equal(c->ops->recv(c, &got, sizeof got, 0, 7, &err), DL_OK);
    assert_int_equal(got, 1);
    /* receive posted first; tags keep messages apart; order kept per tag */
    struct dl_comm_req r1 = {0}, r2 = {0}, s1 = {0}, s2 = {0};
    int done = 1;
    assert_int_equal(c->ops->irecv(c, &got, sizeof got, 0, 3, &r1, &err), DL_OK);
    assert_int_equal(c->ops->irecv(c, &got2, sizeof got2, 0, 4, &r2, &err), DL_OK);
    assert_int_equal(c->ops->test(c, &r1, &done, &err), DL_OK);
    assert_int_equal(done, 0);
    assert_int_equal(c->ops->isend(c, &b, sizeof b, 0, 4, &s1, &err), DL_OK);
    assert_int_equal(c->ops->isend(c, &a, sizeof a, 0, 3, &s2, &err), DL_OK);
    assert_int_equal(dl_comm_waitall(c, (struct dl_comm_req[]){r1, r2, s1, s2}, 4, &err), DL_OK);
    assert_int_equal(got, 99);
    assert_int_equal(got2, 2);
    /* a receive nothing can match is an error, not a hang */
    assert_int_equal(c->ops->recv(c, &got, sizeof got, 0, 5, &err), DL_ERR_COMM);
    assert_non_null(strstr(err.msg, "no send matches"));
    /* a later send with that tag is not swallowed by the withdrawn receive */
    assert_int_equal(c->ops->send(c, &b, sizeof b, 0, 5, &err), DL_OK);
    got = 0;
    assert_int_equal(c->ops->recv(c, &got, sizeof got, 0, 5, &err), DL_OK);
    assert_int_equal(got, 2);
    /* too long a message, and a peer that does not exist */
    double big = 1;
    assert_int_equal(c->ops->send(c, &big, sizeof big, 0, 6, &err), DL_OK);
    assert_int_equal(c->ops->recv(c, &got, sizeof got, 0, 6, &err), DL_ERR_COMM);
    assert_int_equal(c->ops->send(c, &a, sizeof a, 1, 0, &err), DL_ERR_COMM);
    /* unreceived sends are freed at close (the sanitizer build checks) */
    assert_int_equal(c->ops->send(c, &a, sizeof a, 0, 8, &err), DL_OK);
    dl_comm_close(c);
}

static void collectives_and_split(void **state)
{
    (void)state;
    struct dl_comm *c = open_self();
    struct dl_error err;
    float v[3] = {1, 2, 3}, out[3] = {0};
    assert_int_equal(c->ops->allreduce(c, v, DL_F32, 3, &err), DL_OK);
    assert_true(v[0] == 1 && v[1] == 2 && v[2] == 3);
    assert_int_equal(c->ops->reduce_scatter(c, v, out, DL_F32, 3, &err), DL_OK);
    assert_true(out[2] == 3);
    memset(out, 0, sizeof out);
    assert_int_equal(c->ops->allgather(c, v, out, sizeof v, &err), DL_OK);
    assert_true(out[1] == 2);
    assert_int_equal(c->ops->reduce(c, v, DL_F32, 3, 0, &err), DL_OK);
    assert_true(v[0] == 1 && v[1] == 2 && v[2] == 3);
    assert_int_equal(c->ops->reduce(c, v, DL_BF16, 3, 0, &err), DL_ERR_INTERNAL);
    /* all-to-all with oneself: the part at its offset; parts of other sizes refused */
    unsigned char a2a[5] = {1, 2, 3, 4, 5}, got[6] = {0};
    size_t sc = 3, sd = 2, rc = 3, rd = 1, bad = 2;
    assert_int_equal(c->ops->alltoallv(c, a2a, &sc, &sd, got, &rc, &rd, &err), DL_OK);
    assert_true(got[0] == 0 && got[1] == 3 && got[2] == 4 && got[3] == 5 && got[4] == 0);
    assert_int_equal(c->ops->alltoallv(c, a2a, &sc, &sd, got, &bad, &rd, &err), DL_ERR_INTERNAL);
    assert_int_equal(c->ops->bcast(c, v, sizeof v, 0, &err), DL_OK);
    assert_int_equal(c->ops->bcast(c, v, sizeof v, 1, &err), DL_ERR_COMM);
    assert_int_equal(c->ops->barrier(c, &err), DL_OK);
    struct dl_comm *sub = NULL;
    assert_int_equal(c->ops->split(c, 3, 0, &sub, &err), DL_OK);
    assert_non_null(sub);
    assert_int_equal(sub->size, 1);
    dl_comm_close(sub);
    sub = c;
    assert_int_equal(c->ops->split(c, -1, 0, &sub, &err), DL_OK);
    assert_null(sub);
    dl_comm_close(c);
}

/* The stand-in of rank 1 of 3: collectives as if both others held its
 * values; sends and receives complete at once; no split. */
static void standin_plays_one_rank(void **state)
{
    (void)state;
    struct dl_comm *c = NULL;
    assert_int_equal(dl_comm_standin_open(1, 3, &c, NULL), DL_OK);
    assert_int_equal(c->rank, 1);
    assert_int_equal(c->size, 3);
    float v[2] = {1.5f, -2};
    assert_int_equal(c->ops->allreduce(c, v, DL_F32, 2, NULL), DL_OK);
    assert_true(v[0] == 4.5f && v[1] == -6);
    float mine[2] = {7, 8}, all[6] = {0};
    assert_int_equal(c->ops->allgather(c, mine, all, sizeof mine, NULL), DL_OK);
    for (int r = 0; r < 3; r++)
        assert_true(all[2 * r] == 7 && all[2 * r + 1] == 8);
    /* all-to-all: from each rank what this rank sends it, as much as fits */
    unsigned char a2a[6] = {1, 2, 3, 4, 5, 6}, got[6] = {0};
    size_t sc[3] = {1, 2, 3}, sd[3] = {0, 1, 3}, rc[3] = {2, 2, 2}, rd[3] = {0, 2, 4};
    assert_int_equal(c->ops->alltoallv(c, a2a, sc, sd, got, rc, rd, NULL), DL_OK);
    assert_true(got[0] == 1 && got[1] == 0 && got[2] == 2 && got[3] == 3 && got[4] == 4 && got[5] == 5);
    float send[6] = {1, 2, 3, 4, 5, 6}, recv[2] = {0};
    assert_int_equal(c->ops->reduce_scatter(c, send, recv, DL_F32, 2, NULL), DL_OK);
    assert_true(recv[0] == 9 && recv[1] == 12);
    float root_sum[2] = {1, 2}, other[2] = {3, 4};
    assert_int_equal(c->ops->reduce(c, root_sum, DL_F32, 2, 1, NULL), DL_OK); /* as the root: 3 times its own */
    assert_int_equal(c->ops->reduce(c, other, DL_F32, 2, 0, NULL), DL_OK);    /* elsewhere: unchanged */
    assert_true(root_sum[0] == 3 && root_sum[1] == 6 && other[0] == 3 && other[1] == 4);
    float buf[2] = {42, 43};
    struct dl_comm_req req = {.active = 1};
    assert_int_equal(c->ops->irecv(c, buf, sizeof buf, 0, 5, &req, NULL), DL_OK);
    assert_int_equal(c->ops->wait(c, &req, NULL), DL_OK);
    assert_true(buf[0] == 42 && buf[1] == 43 && !req.active);
    assert_int_equal(c->ops->send(c, buf, sizeof buf, 2, 5, NULL), DL_OK);
    struct dl_error err = {0};
    assert_int_equal(c->ops->send(c, buf, sizeof buf, 3, 5, &err), DL_ERR_COMM);
    assert_non_null(strstr(err.msg, "rank 3"));
    struct dl_comm *sub = NULL;
    assert_int_not_equal(c->ops->split(c, 0, 0, &sub, &err), DL_OK);
    dl_comm_close(c);
}

static void every_algorithm_on_one_rank(void **state)
{
    (void)state;
    struct dl_comm *c = open_self();
    struct dl_error err;
    int count = 0;
    for (int i = 0; dl_allreduce_at(i); i++, count++) {
        const struct dl_allreduce_algo *a = dl_allreduce_at(i);
        assert_ptr_equal(dl_allreduce_find(a->name), a);
        float v[5] = {1, -2, 3, 0, 5};
        assert_int_equal(dl_allreduce(c, a->name, v, DL_F32, 5, NULL, &err), DL_OK);
        assert_true(v[0] == 1 && v[1] == -2 && v[4] == 5);
        assert_int_equal(dl_allreduce(c, a->name, v, DL_F32, 0, NULL, &err), DL_OK);
    }
    assert_int_equal(count, 7);
    assert_ptr_equal(dl_allreduce_find("rd"), dl_allreduce_find("recursive_doubling"));
    assert_null(dl_allreduce_find("bogus"));
    float v = 1;
    assert_int_equal(dl_allreduce(c, "bogus", &v, DL_F32, 1, NULL, &err), DL_ERR_SPEC);
    assert_non_null(strstr(err.msg, "bogus"));
    dl_comm_close(c);
}

/* Closed forms from Thakur, Rabenseifner & Gropp (2005). */
static void cost_formulas(void **state)
{
    (void)state;
    struct dl_cost_params cp = {.alpha = 1e-6, .beta = 1e-9, .gamma = 2e-10};
    double m = 1 << 20;
    /* ring: 2(p-1) alpha + 2(p-1)/p m beta + (p-1)/p m gamma */
    assert_true(fabs(dl_cost_ring(&cp, 4, m, NULL) -
                     (6e-6 + 1.5 * m * 1e-9 + 0.75 * m * 2e-10)) < 1e-12);
    /* recursive doubling: lg p (alpha + m beta + m gamma) */
    assert_true(fabs(dl_cost_recursive_doubling(&cp, 8, m, NULL) -
                     3 * (1e-6 + m * 1e-9 + m * 2e-10)) < 1e-12);
    /* Rabenseifner: ring's bandwidth, butterfly's 2 lg p latency */
    assert_true(fabs(dl_cost_rabenseifner(&cp, 8, m, NULL) -
                     (6e-6 + 1.75 * m * 1e-9 + 0.875 * m * 2e-10)) < 1e-12);
    /* not a power of two costs more than the power of two below it */
    assert_true(dl_cost_rabenseifner(&cp, 6, m, NULL) > dl_cost_rabenseifner(&cp, 4, m, NULL));
    /* tree: ceil(lg p) levels of reduce and broadcast, 2 (alpha + m beta)
     * each, plus the reduce's adds (over shared memory the parent's CPU
     * copies and adds: no overlap) */
    assert_true(fabs(dl_cost_tree(&cp, 5, m, NULL) - 3 * (2e-6 + 2 * m * 1e-9 + m * 2e-10)) < 1e-12);
    struct dl_cost_params slow_add = {.alpha = 1e-6, .beta = 1e-9, .gamma = 3e-9};
    assert_true(fabs(dl_cost_tree(&slow_add, 4, m, NULL) - (4e-6 + 4 * m * 1e-9 + 2 * m * 3e-9)) < 1e-12);
    /* beta by the ranks active at once: the tree's last step (one pair of 8
     * ranks) moves at beta_pair, the ring (all 8) at beta, 4 of 8 in between */
    struct dl_cost_params cp2 = {.alpha = 1e-6, .beta = 2e-9, .gamma = 2e-10, .beta_pair = 1e-9};
    assert_true(fabs(dl_cost_beta(&cp2, 2, 8, m) - 1e-9) < 1e-18);
    assert_true(fabs(dl_cost_beta(&cp2, 8, 8, m) - 2e-9) < 1e-18);
    assert_true(fabs(dl_cost_beta(&cp2, 5, 8, m) - 1.5e-9) < 1e-18);
    struct dl_cost_params cp2_all = cp2;
    cp2_all.beta_pair = 0;
    assert_true(dl_cost_tree(&cp2, 8, m, NULL) < dl_cost_tree(&cp2_all, 8, m, NULL));
    assert_true(fabs(dl_cost_ring(&cp2, 8, m, NULL) - dl_cost_ring(&cp2_all, 8, m, NULL)) < 1e-15);
    /* the tree's steps move data one way: at beta_oneway when measured,
     * whatever beta (exchanges) is */
    struct dl_cost_params one_way = {.alpha = 1e-6, .beta = 2e-9, .gamma = 2e-10, .beta_oneway = 1e-9};
    assert_true(fabs(dl_cost_tree(&one_way, 4, m, NULL) - 2 * (2e-6 + 2 * m * 1e-9 + m * 2e-10)) < 1e-12);
    assert_true(fabs(dl_cost_ring(&one_way, 4, m, NULL) - dl_cost_ring(&cp2_all, 4, m, NULL)) < 1e-15);
    /* vectors that fit in cache move at beta_small, in between by log(size) */
    struct dl_cost_params cp3 = {.alpha = 1e-6, .beta = 2e-9, .gamma = 2e-10, .beta_small = 1e-9};
    assert_true(fabs(dl_cost_beta(&cp3, 4, 4, 1 << 20) - 1e-9) < 1e-18);
    assert_true(fabs(dl_cost_beta(&cp3, 4, 4, 4 << 20) - 1.5e-9) < 1e-18);
    assert_true(fabs(dl_cost_beta(&cp3, 4, 4, 64 << 20) - 2e-9) < 1e-18);
    /* gamma: one rank alone at gamma_one, every rank at gamma */
    struct dl_cost_params cp4 = {.alpha = 1e-6, .beta = 2e-9, .gamma = 4e-10, .gamma_one = 2e-10};
    assert_true(fabs(dl_cost_gamma(&cp4, 1, 5, 16 << 20) - 2e-10) < 1e-18);
    assert_true(fabs(dl_cost_gamma(&cp4, 5, 5, 16 << 20) - 4e-10) < 1e-18);
    assert_true(fabs(dl_cost_gamma(&cp4, 3, 5, 16 << 20) - 3e-10) < 1e-18);
    /* additions on vectors that fit in cache run at gamma_small, in between
     * by log(size), for any number of ranks adding */
    struct dl_cost_params cp5 = {.alpha = 1e-6, .beta = 2e-9, .gamma = 4e-10, .gamma_one = 2e-10, .gamma_small = 1e-10};
    assert_true(fabs(dl_cost_gamma(&cp5, 5, 5, 1 << 20) - 1e-10) < 1e-18);
    assert_true(fabs(dl_cost_gamma(&cp5, 5, 5, 4 << 20) - 2.5e-10) < 1e-18);
    assert_true(fabs(dl_cost_gamma(&cp5, 1, 5, 1 << 20) - 0.5e-10) < 1e-18);
    assert_true(fabs(dl_cost_gamma(&cp5, 5, 5, 64 << 20) - 4e-10) < 1e-18);
    /* past the last-level cache: towards beta_large and gamma_large by
     * log(size) from 16 to 64 MiB, constant beyond */
    struct dl_cost_params cp6 = {.alpha = 1e-6, .beta = 2e-9, .gamma = 4e-10, .beta_large = 3e-9, .gamma_large = 6e-10};
    assert_true(fabs(dl_cost_beta(&cp6, 4, 4, 16 << 20) - 2e-9) < 1e-18);
    assert_true(fabs(dl_cost_beta(&cp6, 4, 4, 32 << 20) - 2.5e-9) < 1e-18);
    assert_true(fabs(dl_cost_beta(&cp6, 4, 4, 256u << 20) - 3e-9) < 1e-18);
    assert_true(fabs(dl_cost_gamma(&cp6, 4, 4, 32 << 20) - 5e-10) < 1e-18);
    assert_true(fabs(dl_cost_beta(&cp6, 4, 4, 1 << 20) - 2e-9) < 1e-18); /* no beta_small: the base rate */
    /* one server carries everything; p servers are the ring's bandwidth */
    struct dl_allreduce_opts one = {.ps_servers = 1};
    assert_true(dl_cost_ps(&cp, 4, m, &one) > 3 * dl_cost_ps(&cp, 4, m, NULL));
    assert_true(dl_cost_ring(&cp, 1, m, NULL) == 0);
    /* auto: latency-bound small vectors, bandwidth-bound large ones */
    struct dl_comm fake = {.rank = 0, .size = 8};
    struct dl_allreduce_opts o = {.cost = &cp};
    assert_string_equal(dl_allreduce_choose(&fake, 4, &o)->name, "recursive_doubling");
    const char *big = dl_allreduce_choose(&fake, 16u << 20, &o)->name;
    assert_true(strcmp(big, "ring") == 0 || strcmp(big, "rabenseifner") == 0 ||
                strcmp(big, "ps") == 0);
}

static void cost_cache_round_trip(void **state)
{
    (void)state;
    char dir[] = "/tmp/dltrain-cost-XXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("XDG_CACHE_HOME", dir, 1);
    struct dl_comm *c = open_self();
    struct dl_error err;
    char path[4096];
    assert_int_equal(dl_cost_cache_path(c, path, sizeof path, &err), DL_OK);
    assert_true(strncmp(path, dir, strlen(dir)) == 0);
    assert_non_null(strstr(path, "-p1.txt"));
    struct dl_cost_params a, b;
    int cached = -1;
    assert_int_equal(dl_cost_load_or_measure(c, 0, &a, &cached, &err), DL_OK);
    assert_int_equal(cached, 0);
    assert_true(a.alpha >= 0 && a.beta > 0 && a.gamma > 0);
    assert_int_equal(access(path, R_OK), 0);
    assert_int_equal(dl_cost_load_or_measure(c, 0, &b, &cached, &err), DL_OK);
    assert_int_equal(cached, 1);
    assert_true(fabs(a.beta - b.beta) <= 1e-6 * a.beta);
    /* a corrupt cache is measured again, not trusted */
    FILE *f = fopen(path, "w");
    fputs("garbage\n", f);
    fclose(f);
    assert_int_equal(dl_cost_load_or_measure(c, 0, &b, &cached, &err), DL_OK);
    assert_int_equal(cached, 0);
    remove(path);
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/dltrain", dir);
    rmdir(sub);
    rmdir(dir);
    dl_comm_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(registry_picks_and_rejects),
        cmocka_unit_test(send_to_self_through_the_queue),
        cmocka_unit_test(collectives_and_split),
        cmocka_unit_test(standin_plays_one_rank),
        cmocka_unit_test(every_algorithm_on_one_rank),
        cmocka_unit_test(cost_formulas),
        cmocka_unit_test(cost_cache_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
