/* The element-wise functions of the op set, numbered once for every backend: the C++ op facts
 * (core/src/ops/eltwise.cpp gives each element-wise op its code), the CUDA kernels
 * (kernels/src/device/generic.h) and the Vulkan shaders (shaders/eltwise.comp, through
 * GL_GOOGLE_include_directive) switch on these numbers, so that they cannot drift apart.
 * Plain preprocessor constants: this file is C, C++, CUDA and GLSL at once.
 *
 * Binary functions come first: a code below DUET_EW_BINARY_END reads two inputs. A kernel meets
 * no code it does not know: an op without one is refused before it reaches a kernel, and a
 * kernel's switch answers an unknown code with NaN, never with another function. */
#ifndef DUET_ELTWISE_H
#define DUET_ELTWISE_H

/* y = f(a, b), b broadcast to a's shape */
#define DUET_EW_ADD 0u
#define DUET_EW_SUB 1u
#define DUET_EW_MUL 2u
#define DUET_EW_DIV 3u
#define DUET_EW_SILU_MUL 4u   /* silu(a) * b */
#define DUET_EW_LESS 5u       /* 1 where a < b, else 0 (NaN compares false) */
#define DUET_EW_LESS_EQUAL 6u /* 1 where a <= b, else 0 */
#define DUET_EW_EQUAL 7u      /* 1 where a == b, else 0 */
#define DUET_EW_BINARY_END 8u

/* y = f(x, p): p is the op's float argument (eltwise_param: scale's alpha, pow's exponent) */
#define DUET_EW_SCALE 8u
#define DUET_EW_SILU 9u
#define DUET_EW_GELU 10u      /* erf form */
#define DUET_EW_GELU_TANH 11u /* tanh form */
#define DUET_EW_RELU 12u
#define DUET_EW_EXP 13u
#define DUET_EW_SIGMOID 14u
#define DUET_EW_TANH 15u
#define DUET_EW_ERF 16u
#define DUET_EW_SQRT 17u
#define DUET_EW_POW 18u /* x ^ p, p the op's float argument (the exponent) */
#define DUET_EW_ABS 19u
#define DUET_EW_LOG 20u /* natural logarithm: NaN below 0, -inf at 0 */
/* the trigonometric and hyperbolic functions, as C's (NaN outside their domains) */
#define DUET_EW_SIN 21u
#define DUET_EW_COS 22u
#define DUET_EW_TAN 23u
#define DUET_EW_ASIN 24u
#define DUET_EW_ACOS 25u
#define DUET_EW_ATAN 26u
#define DUET_EW_SINH 27u
#define DUET_EW_COSH 28u
#define DUET_EW_ASINH 29u
#define DUET_EW_ACOSH 30u
#define DUET_EW_ATANH 31u

#define DUET_EW_COUNT 32u

/* The reductions (reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod: duet/op.h),
 * numbered the same way for every backend's reduce kernel. */
#define DUET_RED_SUM 0u
#define DUET_RED_MEAN 1u
#define DUET_RED_MAX 2u
#define DUET_RED_MIN 3u
#define DUET_RED_PROD 4u
#define DUET_RED_COUNT 5u

#endif
