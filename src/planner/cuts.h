/* cuts.h: the planner's stage cuts (PipeDream's partitioner, Narayanan et
 * al. 2019): a sequence of n items (layers in topological order) with a
 * cost and a memory each, cut into P contiguous non-empty runs so that the
 * costliest run is as cheap as possible and, among the cuts that achieve
 * it, the run holding the most memory holds as little as possible.  Two
 * dynamic programs over prefixes: the first finds the least largest cost
 * C, the second the least largest memory over cuts whose every run costs
 * at most C.  Exact (tests/test_planner.c compares with every cut). */
#ifndef DL_PLAN_CUTS_H
#define DL_PLAN_CUTS_H

#include "core/error.h"

/* first[P + 1]: run s is [first[s], first[s + 1]), first[P] = n; ties keep
 * the earliest cuts.  *max_cost and *max_mem (may be NULL) receive the
 * objective.  DL_ERR_SPEC when P < 1 or P > n. */
int dl_cuts_balance(const double *cost, const double *mem, int n, int P, int *first, double *max_cost,
                    double *max_mem, struct dl_error *err);

#endif
