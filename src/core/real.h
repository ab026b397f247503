/* real.h: the floating-point type of the reference ops.
 *
 * Product builds use float.  The gradient-check tests compile the very same op
 * and core sources a second time with -DDL_REAL_DOUBLE, so that central finite
 * differences run in double precision on the code that ships. */
#ifndef DL_REAL_H
#define DL_REAL_H

#ifdef DL_REAL_DOUBLE
typedef double dl_real;
#define DL_REAL_NAME "f64"
#else
typedef float dl_real;
#define DL_REAL_NAME "f32"
#endif

#endif
