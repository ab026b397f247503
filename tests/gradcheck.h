/* gradcheck.h: checks an op's reference backward against central finite
 * differences.  Test programs that use it link libdlref64.a, the op sources
 * compiled with dl_real = double, so the differences are taken in double.
 *
 * The scalar checked is L = sum(out * R) for a fixed random R; backward is
 * called with dout = R.  Every input element and every trainable parameter
 * element (or a random subset of at most max_checks per tensor) is perturbed
 * by +-h.  The check also enforces the op memory contract: backward must
 * overwrite din and accumulate (+=) into dparam. */
#ifndef DL_TEST_GRADCHECK_H
#define DL_TEST_GRADCHECK_H

#include "ops/op.h"
#include "layer_params.h"

struct gc_case {
    const struct dl_op_kind *op;
    const char *attrs;      /* YAML flow mapping, e.g. "{filters: 4, kernel: 3}" */
    int batch;
    int n_in;
    struct dl_shape in[DL_MAX_INPUTS];
    int training;           /* 1 = training mode */
    int max_checks;         /* 0 = default (200) */
    double tol;             /* 0 = default (1e-6 absolute + 1e-5 relative) */
    int ignore_some;        /* a per-position loss: every third label is ignore_index (-100) */
    const int *doc_start;   /* document masking: the call's doc_start ([batch][T], op.h); NULL: none */
};

/* Returns 0 when every checked derivative matches; otherwise 1, and report
 * says which tensor, which element, analytic vs numeric. */
int gc_run(const struct gc_case *c, unsigned seed, char *report, size_t report_size);

/* For cmocka: runs the case, prints the report on failure, fails the test. */
void gc_assert(const struct gc_case *c);

#endif
