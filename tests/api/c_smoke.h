/* The C side of the API tests (c_smoke.c). */
#ifndef DUET_TESTS_API_C_SMOKE_H
#define DUET_TESTS_API_C_SMOKE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 on success with *first = softmax([0, 0])[0]; 0 with the error message copied. */
int duet_c_smoke(float* first, char* error, size_t error_size);

/* 1 when greedy generation of `n` tokens after `prompt` worked: the text streamed and the tokens
 * copied out (c_llm.c); 0 with the error message copied. */
int duet_c_llm(const char* path, const char* prompt, int n, char* text, size_t text_size,
               int32_t* tokens, size_t* count, char* error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif
