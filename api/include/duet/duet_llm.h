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
 *
 * Split over several processes (docs/distributed.md): started by `mpirun -np N app ...`, every
 * rank opens the same model (its own copy of the file, or one on a shared disk) with the same
 * options and `distributed` set; the decoder is cut in pipeline stages over the ranks, each
 * keeping only its stage's weights and KV caches. Rank 0 (duet_llm_rank) then tokenizes, feeds
 * and generates as one process would, with the same ids, and calls duet_llm_finish when done;
 * every other rank calls duet_llm_serve, which follows rank 0's runs and returns when rank 0
 * finishes:
 *
 *   o.distributed = 1;
 *   if (duet_llm_open("model.gguf", &o, &m) != DUET_OK) { ... }
 *   if (duet_llm_rank(m) == 0) {
 *     ... duet_llm_feed, duet_llm_generate ...
 *     duet_llm_finish(m);
 *   } else if (duet_llm_serve(m) != DUET_OK) {
 *     duet_llm_abort(m, duet_last_error());  (ends every rank)
 *   }
 *   duet_llm_destroy(m);
 *
 * Structs: options structs grow only at their end, each member with a default that the
 * duet_*_init function sets (0 where nothing else is said). duet is 0.x: a program is compiled
 * against the headers of the libduet.so it runs with (DUET_VERSION_NUMBER, duet_version_number).
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
  /* Nonzero: the decoder split over the ranks of the MPI run this process belongs to (above;
   * collective: every rank opens with it). Starts MPI unless the application did (then it is the
   * application's to finalize; otherwise duet_llm_destroy finalizes it, and MPI cannot start
   * again in this process). Not started by mpirun, or a build without MPI:
   * DUET_ERROR_UNSUPPORTED. Every rank must run the same duet build and open the same model
   * (checked at start: refused on every rank, naming the rank that differs). The cache is f32
   * unless cache_dtype says otherwise. Default 0: this process alone. */
  int32_t distributed;
  /* With distributed: nonzero puts a stage on every rank even where fewer are estimated faster
   * (default 0: the planner may leave ranks without a stage, e.g. where the model fits one). */
  int32_t every_rank;
  /* With distributed: the longest wait for another rank once started, in seconds (<= 0:
   * DUET_DIST_TIMEOUT, else 120 s); a longer wait fails naming both ranks and the step. */
  double timeout_s;
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

/* ---- split over MPI ranks (options.distributed) ---------------------------------------- */

/* This process's rank (0 when not distributed; -1 for NULL) and how many ranks there are (1 when
 * not distributed; 0 for NULL). Only rank 0 feeds, generates, steps and resets (elsewhere those
 * fail with DUET_ERROR_INVALID_ARGUMENT); tokenizing works on every rank. */
DUET_C_API int duet_llm_rank(const duet_llm* m);
DUET_C_API int duet_llm_ranks(const duet_llm* m);
/* Ranks other than 0: follow rank 0's runs until it calls duet_llm_finish or destroys its
 * handle. Fails on rank 0 and when not distributed (DUET_ERROR_INVALID_ARGUMENT), or with the
 * transport's error (a rank that stopped answering: both ranks and the step named). */
DUET_C_API duet_status duet_llm_serve(duet_llm* m);
/* Rank 0: the other ranks return from duet_llm_serve (collective with them); later generation
 * fails. duet_llm_destroy does it where rank 0 has not. Nothing to do when not distributed. */
DUET_C_API duet_status duet_llm_finish(duet_llm* m);
/* Ends every rank of the run at once (MPI_Abort) after printing `message` as this rank's error;
 * not distributed, ends this process (exit status 1). Does not return. */
DUET_C_API void duet_llm_abort(duet_llm* m, const char* message);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DUET_DUET_LLM_H */
