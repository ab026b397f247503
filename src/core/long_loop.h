/* long_loop.h: an element-wise loop split over OpenMP's threads only when
 * it is long.  `#pragma omp parallel ... if (n > N)` is no substitute: an
 * if(0) region still makes a team of one, and nested in a kernel's own
 * parallel region a new team each call (malloc, futexes).  A fused ReLU's
 * gradient mask over LeNet-5 conv1's rows (28 values, 10,752 rows a step)
 * spent 3 ms of a 5 ms step there on an AMD EPYC (Zen 5). */
#ifndef DL_CORE_LONG_LOOP_H
#define DL_CORE_LONG_LOOP_H

/* Elements from which a loop is worth the threads. */
#define DL_LONG_LOOP 65536

/* Runs BODY (which reads the index i) for i in [0, n): vectorized here, or
 * across the threads where n exceeds DL_LONG_LOOP. */
#define DL_EACH(n, BODY)                                                 \
    do {                                                                 \
        long n_ = (n);                                                   \
        if (n_ > DL_LONG_LOOP) {                                         \
            _Pragma("omp parallel for simd schedule(static)")            \
            for (long i = 0; i < n_; i++) { BODY; }                      \
        } else {                                                         \
            _Pragma("omp simd")                                          \
            for (long i = 0; i < n_; i++) { BODY; }                      \
        }                                                                \
    } while (0)

#endif
