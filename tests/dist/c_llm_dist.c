/* The C API's text generation split over MPI ranks (duet_llm_options.distributed), as an
 * application written in C uses it, run as the ranks of `mpirun -np 2` by llama_test.cpp: every
 * rank opens the same model split over the ranks; rank 0 feeds a prompt (in chunks, pipelined
 * over the stages) and generates greedily, then finishes; the others serve. Rank 0 then opens the
 * model in this process alone and compares the ids, one by one.
 *
 *   c_llm_dist MODEL.gguf TOKENS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duet/duet_llm.h"

#define MAX_TOKENS 32

struct ids {
  int32_t v[MAX_TOKENS];
  size_t n;
};

static int collect(void* user, int32_t token, const char* text, size_t length) {
  struct ids* ids = (struct ids*)user;
  (void)text;
  (void)length;
  if (ids->n < MAX_TOKENS) ids->v[ids->n++] = token;
  return 1;
}

static duet_status generate(duet_llm* m, int n, struct ids* out) {
  const int32_t prompt[5] = {5, 6, 7, 8, 9};
  duet_llm_generate_options g;
  duet_status s = duet_llm_feed(m, prompt, 5);
  if (s != DUET_OK) return s;
  duet_llm_generate_options_init(&g);
  g.max_tokens = n;
  g.sampling.temperature = 0; /* greedy */
  g.stop_at_end = 0;
  out->n = 0;
  return duet_llm_generate(m, &g, collect, out, NULL, NULL);
}

int main(int argc, char** argv) {
  duet_llm* m = NULL;
  duet_llm* local = NULL;
  duet_llm_options o;
  struct ids split, single;
  const int32_t one = 1;
  int n = 0;
  size_t i = 0;
  if (argc != 3) {
    fprintf(stderr, "usage: c_llm_dist MODEL TOKENS\n");
    return 2;
  }
  n = atoi(argv[2]);
  if (n < 1 || n > MAX_TOKENS) return 2;
  duet_llm_options_init(&o);
  o.devices = "cpu:0";
  o.policy = "";
  o.cache_dtype = DUET_F32;
  o.prefill_chunk = 3; /* the prompt's two chunks pipelined over the stages */
  o.distributed = 1;
  o.every_rank = 1;
  if (duet_llm_open(argv[1], &o, &m) != DUET_OK) {
    fprintf(stderr, "c_llm_dist: duet_llm_open: %s\n", duet_last_error());
    return 1;
  }
  if (duet_llm_rank(m) != 0) {
    /* Only rank 0 generates. */
    if (duet_llm_feed(m, &one, 1) != DUET_ERROR_INVALID_ARGUMENT)
      duet_llm_abort(m, "duet_llm_feed on rank 1 was not refused");
    if (duet_llm_serve(m) != DUET_OK) duet_llm_abort(m, duet_last_error());
    duet_llm_destroy(m);
    return 0;
  }
  if (duet_llm_serve(m) != DUET_ERROR_INVALID_ARGUMENT)
    duet_llm_abort(m, "duet_llm_serve on rank 0 was not refused");
  if (generate(m, n, &split) != DUET_OK) duet_llm_abort(m, duet_last_error());
  if (duet_llm_finish(m) != DUET_OK) duet_llm_abort(m, duet_last_error());
  if (duet_llm_feed(m, &one, 1) != DUET_ERROR_INVALID_ARGUMENT)
    duet_llm_abort(m, "duet_llm_feed after duet_llm_finish was not refused");

  o.distributed = 0;
  o.every_rank = 0;
  if (duet_llm_open(argv[1], &o, &local) != DUET_OK || generate(local, n, &single) != DUET_OK) {
    fprintf(stderr, "c_llm_dist: one process: %s\n", duet_last_error());
    return 1;
  }
  printf("ids:");
  for (i = 0; i < split.n; ++i) printf(" %d", (int)split.v[i]);
  printf("\n");
  if (split.n != single.n || memcmp(split.v, single.v, split.n * sizeof(int32_t)) != 0) {
    printf("one process:");
    for (i = 0; i < single.n; ++i) printf(" %d", (int)single.v[i]);
    printf("\nc_llm_dist: the split's ids differ from one process's\n");
    return 1;
  }
  printf("c llm: %zu ids over %d ranks, the same as one process's\n", split.n, duet_llm_ranks(m));
  duet_llm_destroy(local);
  duet_llm_destroy(m);
  return 0;
}
