/* duet from C: load a graph, run it on this machine's devices, read the output. */
#include <stdio.h>

#include <duet/duet.h>

static const char* kGraph =
    "{\"format\": \"duet-graph\", \"version\": 1, \"name\": \"hello\","
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [2, 4]}],"
    " \"nodes\": [{\"name\": \"y\", \"op\": \"softmax\", \"inputs\": [\"x\"]}],"
    " \"outputs\": [\"y\"]}";

int main(void) {
  duet_graph* g = NULL;
  duet_engine* e = NULL;
  duet_tensor *x = NULL, *y = NULL;
  const int64_t shape[2] = {2, 4};
  const float data[8] = {1, 2, 3, 4, 4, 3, 2, 1};
  const char* names[1] = {"x"};
  int ok = duet_graph_parse(kGraph, NULL, &g) == DUET_OK &&
           duet_engine_create(g, NULL, &e) == DUET_OK &&
           duet_tensor_create(DUET_F32, shape, 2, data, &x) == DUET_OK;
  const duet_tensor* inputs[1] = {x};
  ok = ok && duet_engine_run(e, names, inputs, 1, &y, 1) == DUET_OK;
  if (ok) {
    const float* p = (const float*)duet_tensor_data(y);
    printf("softmax of row 0: %.4f %.4f %.4f %.4f (libduet %s)\n", p[0], p[1], p[2], p[3],
           duet_version());
  } else {
    fprintf(stderr, "duet: %s\n", duet_last_error());
  }
  duet_tensor_destroy(y);
  duet_tensor_destroy(x);
  duet_engine_destroy(e);
  duet_graph_destroy(g);
  return ok ? 0 : 1;
}
