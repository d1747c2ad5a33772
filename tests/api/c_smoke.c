/* duet.h as a C program sees it: compiled as C99 with every warning, linked into the API tests.
 * Runs a softmax graph end to end and reports the first output value (or the error) to the
 * caller. */
#include <stdio.h>
#include <string.h>

#include "c_smoke.h"
#include "duet/duet.h"

static const char* kGraph =
    "{\"format\": \"duet-graph\", \"version\": 1, \"name\": \"c_smoke\","
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [1, 2]}],"
    " \"nodes\": [{\"name\": \"y\", \"op\": \"softmax\", \"inputs\": [\"x\"]}],"
    " \"outputs\": [\"y\"]}";

int duet_c_smoke(float* first, char* error, size_t error_size) {
  float out[2] = {0.0f, 0.0f};
  duet_graph* g = NULL;
  duet_engine* e = NULL;
  duet_tensor *x = NULL, *y = NULL;
  const int64_t shape[2] = {1, 2};
  const float data[2] = {0.0f, 0.0f};
  const char* names[1] = {"x"};
  const duet_tensor* inputs[1];
  int ok = duet_graph_parse(kGraph, NULL, &g) == DUET_OK &&
           duet_engine_create(g, "", &e) == DUET_OK &&
           duet_tensor_create(DUET_F32, shape, 2, data, &x) == DUET_OK;
  inputs[0] = x;
  ok = ok && duet_engine_run(e, names, inputs, 1, &y, 1) == DUET_OK;
  ok = ok && duet_tensor_to_float(y, out, 2) == DUET_OK;
  *first = out[0];
  if (!ok) {
    strncpy(error, duet_last_error(), error_size - 1);
    error[error_size - 1] = '\0';
  }
  duet_tensor_destroy(y);
  duet_tensor_destroy(x);
  duet_engine_destroy(e);
  duet_graph_destroy(g);
  return ok;
}
