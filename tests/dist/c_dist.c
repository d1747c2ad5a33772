/* The C API's distributed runs, as an application written in C uses them, run as the ranks of
 * `mpirun -np 2` by run_test.cpp: every rank creates the distributed engine on the same graph;
 * rank 0 runs it several times (the runs read the caches the runs before wrote) and compares each
 * output, byte for byte, with one process's engine on the same graph, then finishes; the other
 * ranks serve.
 *
 *   c_dist GRAPH.json INPUTS.safetensors RUNS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duet/duet.h"

static int failed(const char* what) {
  fprintf(stderr, "c_dist: %s: %s\n", what, duet_last_error());
  return 1;
}

int main(int argc, char** argv) {
  duet_graph* g = NULL;
  duet_dist* d = NULL;
  duet_engine* local = NULL;
  duet_tensor* in[2] = {NULL, NULL};
  const char* names[2] = {"x", "pos"};
  int runs = 0, r = 0, rank = -1;
  char* explain = NULL;
  if (argc != 4) {
    fprintf(stderr, "usage: c_dist GRAPH INPUTS RUNS\n");
    return 2;
  }
  runs = atoi(argv[3]);
  if (duet_graph_load(argv[1], &g) != DUET_OK) return failed("duet_graph_load");
  if (duet_dist_create(g, "deny=vulkan", 1, 0, &d) != DUET_OK) return failed("duet_dist_create");
  rank = duet_dist_rank(d);
  if (rank != 0) {
    if (duet_dist_serve(d) != DUET_OK) duet_dist_abort(d, duet_last_error());
    duet_dist_destroy(d);
    duet_graph_destroy(g);
    return 0;
  }
  if (duet_dist_serve(d) != DUET_ERROR_INVALID_ARGUMENT) {
    fprintf(stderr, "c_dist: duet_dist_serve on rank 0 was not refused\n");
    duet_dist_abort(d, "duet_dist_serve on rank 0 was not refused");
  }
  if (duet_dist_explain(d, &explain) != DUET_OK) duet_dist_abort(d, duet_last_error());
  printf("%s", explain);
  duet_string_free(explain);
  if (duet_tensor_load(argv[2], "x", &in[0]) != DUET_OK ||
      duet_tensor_load(argv[2], "pos", &in[1]) != DUET_OK ||
      duet_engine_create(g, "deny=vulkan", &local) != DUET_OK)
    duet_dist_abort(d, duet_last_error());
  for (r = 0; r < runs; ++r) {
    duet_tensor* want = NULL;
    duet_tensor* got = NULL;
    if (duet_engine_run(local, names, (const duet_tensor* const*)in, 2, &want, 1) != DUET_OK ||
        duet_dist_run(d, names, (const duet_tensor* const*)in, 2, &got, 1) != DUET_OK)
      duet_dist_abort(d, duet_last_error());
    if (duet_tensor_nbytes(want) != duet_tensor_nbytes(got) ||
        memcmp(duet_tensor_data(want), duet_tensor_data(got), duet_tensor_nbytes(want)) != 0) {
      fprintf(stderr, "c_dist: run %d: the distributed output differs from one process's\n", r);
      duet_dist_abort(d, "outputs differ");
    }
    duet_tensor_destroy(want);
    duet_tensor_destroy(got);
  }
  if (duet_dist_finish(d) != DUET_OK) duet_dist_abort(d, duet_last_error());
  printf("c api: %d runs over %d ranks, each output identical to one process's\n", runs,
         duet_dist_size(d));
  duet_tensor_destroy(in[0]);
  duet_tensor_destroy(in[1]);
  duet_engine_destroy(local);
  duet_dist_destroy(d);
  duet_graph_destroy(g);
  return 0;
}
