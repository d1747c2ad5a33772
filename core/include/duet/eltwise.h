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
#define DUET_EW_FMOD 8u       /* C's fmod(a, b): a - b * trunc(a / b), exactly; a's sign */
#define DUET_EW_BINARY_END 9u

/* y = f(x, p): p is the op's float argument (eltwise_param: scale's alpha, pow's exponent) */
#define DUET_EW_SCALE 9u
#define DUET_EW_SILU 10u
#define DUET_EW_GELU 11u      /* erf form */
#define DUET_EW_GELU_TANH 12u /* tanh form */
#define DUET_EW_RELU 13u
#define DUET_EW_EXP 14u
#define DUET_EW_SIGMOID 15u
#define DUET_EW_TANH 16u
#define DUET_EW_ERF 17u
#define DUET_EW_SQRT 18u
#define DUET_EW_POW 19u /* x ^ p, p the op's float argument (the exponent) */
#define DUET_EW_ABS 20u
#define DUET_EW_LOG 21u /* natural logarithm: NaN below 0, -inf at 0 */
/* the trigonometric and hyperbolic functions, as C's (NaN outside their domains) */
#define DUET_EW_SIN 22u
#define DUET_EW_COS 23u
#define DUET_EW_TAN 24u
#define DUET_EW_ASIN 25u
#define DUET_EW_ACOS 26u
#define DUET_EW_ATAN 27u
#define DUET_EW_SINH 28u
#define DUET_EW_COSH 29u
#define DUET_EW_ASINH 30u
#define DUET_EW_ACOSH 31u
#define DUET_EW_ATANH 32u

#define DUET_EW_COUNT 33u

/* The reductions (reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod: duet/op.h),
 * numbered the same way for every backend's reduce kernel. */
#define DUET_RED_SUM 0u
#define DUET_RED_MEAN 1u
#define DUET_RED_MAX 2u
#define DUET_RED_MIN 3u
#define DUET_RED_PROD 4u
#define DUET_RED_COUNT 5u

#endif
