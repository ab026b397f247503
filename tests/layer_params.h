/* layer_params.h: room for the parameters of one layer in the tests' own
 * arrays.  The program has no bound (op.h: any number a layer); the op
 * kinds the tests run have at most this many, which each test asserts
 * where it learns a layer's count. */
#ifndef DL_TESTS_LAYER_PARAMS_H
#define DL_TESTS_LAYER_PARAMS_H

#define TEST_MAX_PARAMS 16 /* a recurrent layer: 4 a layer and direction */

#endif
