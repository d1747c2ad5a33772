/* duet: text generation through the C API. A Llama-architecture GGUF model (llama, mistral,
 * qwen2) with its tokenizer: text in, tokens streamed out.
 *
 *   duet_llm* m = NULL;
 *   if (duet_llm_open("model.gguf", NULL, &m) != DUET_OK) { fprintf(stderr, "%s\n",
 *     duet_last_error()); ... }
 *   int32_t ids[512];
 *   size_t n = 0;
 *   duet_llm_tokenize(m, "The capital of France is", (size_t)-1, DUET_LLM_ADD_SPECIAL, ids, 512,
 *                     &n);
 *   duet_llm_feed(m, ids, n);
 *   duet_llm_generate_options g;
 *   duet_llm_generate_options_init(&g);
 *   g.max_tokens = 32;
 *   duet_llm_generate(m, &g, print_token, NULL, NULL, NULL);
 *   duet_llm_destroy(m);
 *
 * Errors, strings and threads as in duet/duet.h: every call returns a duet_status, the message
 * is duet_last_error(), strings returned as `char**` are released with duet_string_free, no C++
 * exception crosses. Calls on one duet_llm may come from any thread and take turns; a token
 * callback must not call its own duet_llm (that call fails).
 *
 * The context is every token fed or generated since open or reset; the last token generated
 * enters the model's cache with the next feed, step or generate (see duet/llm.h).
 */
#ifndef DUET_DUET_LLM_H
#define DUET_DUET_LLM_H

#include <stddef.h>
#include <stdint.h>

#include "duet/duet.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct duet_llm duet_llm;

typedef struct duet_llm_options {
  const char* devices;   /* "cuda:0" or "cpu:0,vulkan:0"; NULL or "": every device here */
  const char* policy;    /* NULL: the DUET_POLICY environment variable; else as given */
  int64_t context;       /* the KV cache's capacity in tokens; 0: the file's, at most 4096 */
  int32_t cache_dtype;   /* -1: f16 where attention computes f16, else f32; or DUET_F32,
                            DUET_F16, DUET_BF16 */
  int64_t prefill_chunk; /* prompts run in chunks of at most this many tokens (default 512) */
} duet_llm_options;

/* The defaults above. */
DUET_C_API void duet_llm_options_init(duet_llm_options* options);

/* Reads the model and its tokenizer and plans it on the devices. `options` may be NULL
 * (defaults). A file without a usable tokenizer opens anyway: prompts and output are then token
 * ids, and duet_llm_notes says what is missing. */
DUET_C_API duet_status duet_llm_open(const char* path, const duet_llm_options* options,
                                     duet_llm** out);
DUET_C_API void duet_llm_destroy(duet_llm* m);

DUET_C_API int64_t duet_llm_context(const duet_llm* m);    /* the cache's capacity */
DUET_C_API int64_t duet_llm_position(const duet_llm* m);   /* tokens in the context */
DUET_C_API int64_t duet_llm_vocab_size(const duet_llm* m); /* rows of the model's embedding */
DUET_C_API int duet_llm_has_tokenizer(const duet_llm* m);
DUET_C_API int32_t duet_llm_bos(const duet_llm* m); /* -1: none (or no tokenizer) */
DUET_C_API int32_t duet_llm_eos(const duet_llm* m);
/* Whether a token ends generation (EOS, end of turn). */
DUET_C_API int duet_llm_is_end(const duet_llm* m, int32_t token);
/* What the user should know (a missing tokenizer, weights dequantized at load), one per line
 * ("" when nothing). */
DUET_C_API duet_status duet_llm_notes(const duet_llm* m, char** out);
/* The KV cache's dtype and why, then the decode step's plan in words. */
DUET_C_API duet_status duet_llm_explain(const duet_llm* m, char** out);

/* ---- tokens ---------------------------------------------------------------------------- */

#define DUET_LLM_ADD_SPECIAL 1   /* BOS / EOS where the file asks for them */
#define DUET_LLM_PARSE_SPECIAL 2 /* control tokens written in the text become those tokens */

/* Token ids of UTF-8 text (`length` bytes; (size_t)-1: NUL-terminated). `*count` receives how
 * many there are; when more than `capacity`, nothing is written and the status is
 * DUET_ERROR_INVALID_ARGUMENT (`ids` may be NULL with capacity 0 to ask). Invalid UTF-8 and a
 * model without a tokenizer (DUET_ERROR_UNSUPPORTED) are errors. */
DUET_C_API duet_status duet_llm_tokenize(duet_llm* m, const char* text, size_t length, int flags,
                                         int32_t* ids, size_t capacity, size_t* count);
/* The text of tokens (valid UTF-8, NUL-terminated). */
DUET_C_API duet_status duet_llm_detokenize(duet_llm* m, const int32_t* ids, size_t count,
                                           char** out);

/* ---- generation ------------------------------------------------------------------------ */

typedef struct duet_llm_sampling {
  float temperature;     /* 0: greedy (default 0.8) */
  int32_t top_k;         /* 0: off (default 40) */
  float top_p;           /* 1: off (default 0.95) */
  float min_p;           /* 0: off (default 0.05) */
  float repeat_penalty;  /* 1: off (default 1) */
  int32_t repeat_last_n; /* default 64 */
  uint64_t seed;         /* default 0; the same seed, the same tokens on the same device */
} duet_llm_sampling;

DUET_C_API void duet_llm_sampling_init(duet_llm_sampling* sampling);

typedef struct duet_llm_generate_options {
  int32_t max_tokens; /* at least 1 (default 128) */
  duet_llm_sampling sampling;
  const char* const* stop; /* stop strings (NUL-terminated); generation ends before the first */
  size_t stop_count;
  int stop_at_end; /* end at the tokenizer's end tokens (default 1) */
} duet_llm_generate_options;

DUET_C_API void duet_llm_generate_options_init(duet_llm_generate_options* options);

typedef enum duet_llm_stop {
  DUET_LLM_STOP_LENGTH = 0,
  DUET_LLM_STOP_END_TOKEN = 1,
  DUET_LLM_STOP_STRING = 2,
  DUET_LLM_STOP_CALLBACK = 3,
  DUET_LLM_STOP_CONTEXT_FULL = 4,
  DUET_LLM_STOP_MAX_ENUM = 0x7FFFFFFF
} duet_llm_stop;

/* Called with each token as it is made and the text it completes (`length` bytes of UTF-8, also
 * NUL-terminated; empty while a character or a possible stop string is incomplete). Return
 * nonzero to go on, 0 to stop. */
typedef int (*duet_llm_token_callback)(void* user, int32_t token, const char* text, size_t length);

/* Appends tokens to the context and runs them. */
DUET_C_API duet_status duet_llm_feed(duet_llm* m, const int32_t* ids, size_t count);
/* Generates from the context until a stop; `callback` (may be NULL) gets every token. `reason`
 * and `tokens` (each may be NULL) receive why it stopped and how many tokens were made. */
DUET_C_API duet_status duet_llm_generate(duet_llm* m, const duet_llm_generate_options* options,
                                         duet_llm_token_callback callback, void* user,
                                         duet_llm_stop* reason, size_t* tokens);
/* One token, chosen from the logits after the context: the handle keeps one sampler (its seed
 * and the tokens its penalty has seen), made again when `sampling` differs from the last call's
 * or after a reset. NULL: greedy. */
DUET_C_API duet_status duet_llm_step(duet_llm* m, const duet_llm_sampling* sampling,
                                     int32_t* token);
/* Empties the context. */
DUET_C_API duet_status duet_llm_reset(duet_llm* m);

typedef struct duet_llm_timings {
  int64_t prompt_tokens; /* tokens fed in runs of more than one */
  double prompt_seconds;
  int64_t decode_tokens; /* one-token runs */
  double decode_seconds;
  int64_t steady_tokens; /* of those, the runs after the first two on their plan (steady state) */
  double steady_seconds;
  double sample_seconds;
  int64_t runs;
} duet_llm_timings;

DUET_C_API duet_status duet_llm_get_timings(const duet_llm* m, duet_llm_timings* out);
DUET_C_API void duet_llm_reset_timings(duet_llm* m);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DUET_DUET_LLM_H */
