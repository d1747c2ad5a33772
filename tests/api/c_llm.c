/* duet_llm.h as a C program sees it: compiled as C99 with every warning, linked into the API
 * tests. Generates greedily from a model file with its tokenizer and hands back the text the
 * callback received and the tokens. */
#include <stdio.h>
#include <string.h>

#include "c_smoke.h"
#include "duet/duet_llm.h"

struct collected {
  char text[512];
  size_t length;
  int32_t tokens[64];
  size_t count;
};

static int collect(void* user, int32_t token, const char* text, size_t length) {
  struct collected* c = (struct collected*)user;
  if (c->count < 64) c->tokens[c->count++] = token;
  if (c->length + length < sizeof c->text) {
    memcpy(c->text + c->length, text, length);
    c->length += length;
    c->text[c->length] = '\0';
  }
  return 1;
}

int duet_c_llm(const char* path, const char* prompt, int n, char* text, size_t text_size,
               int32_t* tokens, size_t* count, char* error, size_t error_size) {
  duet_llm* m = NULL;
  duet_llm_options o;
  duet_llm_generate_options g;
  int32_t ids[256];
  size_t n_ids = 0;
  duet_llm_stop reason = DUET_LLM_STOP_MAX_ENUM;
  size_t made = 0;
  struct collected c;
  int ok;
  memset(&c, 0, sizeof c);
  duet_llm_options_init(&o);
  o.devices = "cpu:0";
  o.policy = "";
  duet_llm_generate_options_init(&g);
  g.max_tokens = n;
  g.sampling.temperature = 0.0f;
  g.stop_at_end = 0;
  ok =
      duet_llm_open(path, &o, &m) == DUET_OK &&
      duet_llm_tokenize(m, prompt, (size_t)-1, DUET_LLM_ADD_SPECIAL, ids, 256, &n_ids) == DUET_OK &&
      duet_llm_feed(m, ids, n_ids) == DUET_OK &&
      duet_llm_generate(m, &g, collect, &c, &reason, &made) == DUET_OK;
  if (ok) {
    strncpy(text, c.text, text_size - 1);
    text[text_size - 1] = '\0';
    memcpy(tokens, c.tokens, c.count * sizeof(int32_t));
    *count = c.count;
    ok = reason == DUET_LLM_STOP_LENGTH && made == c.count;
  } else {
    strncpy(error, duet_last_error(), error_size - 1);
    error[error_size - 1] = '\0';
  }
  duet_llm_destroy(m);
  return ok;
}
