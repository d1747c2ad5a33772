/* Text generation through the C API: streams what a Llama-architecture GGUF model writes after a
 * prompt, greedily.
 *
 *   generate MODEL.gguf "Once upon a time" [TOKENS]
 */
#include <stdio.h>
#include <stdlib.h>

#include <duet/duet_llm.h>

static int print_token(void* user, int32_t token, const char* text, size_t length) {
  (void)user;
  (void)token;
  fwrite(text, 1, length, stdout);
  fflush(stdout);
  return 1; /* 0 would stop */
}

int main(int argc, char** argv) {
  duet_llm* m = NULL;
  duet_llm_generate_options g;
  int32_t ids[4096];
  size_t n = 0;
  duet_llm_stop reason = DUET_LLM_STOP_LENGTH;
  int ok;
  if (argc < 3) {
    fprintf(stderr, "usage: generate MODEL.gguf PROMPT [TOKENS]\n");
    return 2;
  }
  duet_llm_generate_options_init(&g);
  g.max_tokens = argc > 3 ? atoi(argv[3]) : 32;
  g.sampling.temperature = 0.0f; /* greedy; or a temperature and g.sampling.seed */
  ok = duet_llm_open(argv[1], NULL, &m) == DUET_OK &&
       duet_llm_tokenize(m, argv[2], (size_t)-1, DUET_LLM_ADD_SPECIAL, ids, 4096, &n) == DUET_OK &&
       duet_llm_feed(m, ids, n) == DUET_OK &&
       duet_llm_generate(m, &g, print_token, NULL, &reason, NULL) == DUET_OK;
  if (ok)
    printf("\n[stopped: %s]\n", reason == DUET_LLM_STOP_END_TOKEN ? "end of text" : "other");
  else
    fprintf(stderr, "generate: %s\n", duet_last_error());
  duet_llm_destroy(m);
  return ok ? 0 : 1;
}
