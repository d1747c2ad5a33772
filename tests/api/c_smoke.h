/* The C side of the API tests (c_smoke.c). */
#ifndef DUET_TESTS_API_C_SMOKE_H
#define DUET_TESTS_API_C_SMOKE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 on success with *first = softmax([0, 0])[0]; 0 with the error message copied. */
int duet_c_smoke(float* first, char* error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif
