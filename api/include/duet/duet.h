/* duet: the C API. Load a graph, run it on this machine's devices, read the outputs.
 *
 *   duet_graph* g = NULL;
 *   duet_engine* e = NULL;
 *   if (duet_graph_load("mlp.json", &g) != DUET_OK ||
 *       duet_engine_create(g, NULL, &e) != DUET_OK) {
 *     fprintf(stderr, "%s\n", duet_last_error());
 *     ...
 *   }
 *
 * Everything is reached through opaque handles (duet_graph, duet_engine, duet_plan,
 * duet_tensor, duet_device_tensor), each created by one function and released by its
 * duet_*_destroy (NULL is accepted). Strings returned as `char**` are released with
 * duet_string_free.
 *
 * Errors: every function that can fail returns a duet_status; on failure duet_last_error()
 * returns a one-sentence message naming what was wrong. The message is per thread and stays
 * valid until the next failing duet call on that thread. No C++ exception ever leaves this API.
 *
 * Threads: every function may be called from any thread. duet_engine_run may be called on one
 * engine from several threads at once (runs on one engine take turns: they share its buffers);
 * several engines may run at the same time, also on the same devices. A duet_tensor or
 * duet_graph may be read by several threads at once, but not written while others use it.
 *
 * The C++ API (duet/engine.h, duet/graph.h, ...) is the primary one for C++ programs; this one is
 * for C and for languages with a C foreign-function interface.
 */
#ifndef DUET_DUET_H
#define DUET_DUET_H

#include <stddef.h>
#include <stdint.h>

#include "duet/version.h"

#if defined(_WIN32)
#define DUET_C_API
#else
#define DUET_C_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status and errors ---------------------------------------------------------------- */

typedef enum duet_status {
  DUET_OK = 0,
  DUET_ERROR_INVALID_ARGUMENT = 1, /* malformed input: shapes, dtypes, names, NULL pointers */
  DUET_ERROR_UNSUPPORTED = 2,      /* well-formed, but no device here can do it */
  DUET_ERROR_OUT_OF_MEMORY = 3,
  DUET_ERROR_NOT_FOUND = 4,         /* unknown device, profile, tensor name, missing file */
  DUET_ERROR_IO = 5,                /* reading or writing a file failed */
  DUET_ERROR_PARSE = 6,             /* a file's content is malformed (graph, safetensors, policy) */
  DUET_ERROR_DEVICE_LOST = 7,       /* a device failed; later work on it fails too */
  DUET_ERROR_INTERNAL = 8,          /* a bug in duet */
  DUET_STATUS_MAX_ENUM = 0x7FFFFFFF /* not a status: keeps the enum int-sized in C and C++ */
} duet_status;

/* The message of this thread's last failed call ("" when none has failed). */
DUET_C_API const char* duet_last_error(void);
/* "ok", "invalid_argument", ... */
DUET_C_API const char* duet_status_name(duet_status status);
/* Releases a string returned by this API. */
DUET_C_API void duet_string_free(char* s);

/* ---- version --------------------------------------------------------------------------- */

/* The library's version, "0.1.0" (the headers' is DUET_VERSION_STRING). */
DUET_C_API const char* duet_version(void);
/* DUET_VERSION_MAJOR * 10000 + DUET_VERSION_MINOR * 100 + DUET_VERSION_PATCH of the library. */
DUET_C_API int duet_version_number(void);
/* Which build the library is, in one line: the version, the git commit it was built from (and
 * whether the tree had uncommitted changes; "source revision unknown" with the reason outside a
 * git checkout), the compiler and the build type with its flags, e.g. "duet 0.1.0, commit
 * 30e0be5ca0d1, GNU 12.2.0, Release (-O3 -DNDEBUG)". The ranks of a distributed run compare
 * them at start (docs/distributed.md). */
DUET_C_API const char* duet_build_identity(void);

/* ---- tensors (host memory) ------------------------------------------------------------- */

typedef enum duet_dtype {
  DUET_F32 = 0,
  DUET_F16 = 1,  /* IEEE half, stored as uint16_t */
  DUET_BF16 = 2, /* bfloat16, stored as uint16_t */
  DUET_I8 = 3,
  DUET_I32 = 4,
  /* Block-quantized weights (duet/block_layout.h): rows of whole blocks along the last dim, whose
   * size must be a multiple of the block (32, or 256 for the _K formats). */
  DUET_Q8_0 = 5,
  DUET_Q4_0 = 6,
  DUET_Q4_1 = 7,
  DUET_Q5_0 = 8,
  DUET_Q5_1 = 9,
  DUET_Q2_K = 10,
  DUET_Q3_K = 11,
  DUET_Q4_K = 12,
  DUET_Q5_K = 13,
  DUET_Q6_K = 14,
  DUET_Q4_Z = 15,
  DUET_DTYPE_MAX_ENUM = 0x7FFFFFFF /* not a dtype: keeps the enum int-sized in C and C++ */
} duet_dtype;

#define DUET_MAX_RANK 4

typedef struct duet_tensor duet_tensor;

/* A dense row-major tensor of `rank` (0..4) dimensions. `data` (may be NULL: zero-filled) is
 * copied: numel * element size bytes (block formats: numel / block elements * block bytes, as
 * duet_tensor_nbytes says). */
DUET_C_API duet_status duet_tensor_create(duet_dtype dtype, const int64_t* shape, int rank,
                                          const void* data, duet_tensor** out);
DUET_C_API void duet_tensor_destroy(duet_tensor* t);

DUET_C_API duet_dtype duet_tensor_dtype(const duet_tensor* t);
DUET_C_API int duet_tensor_rank(const duet_tensor* t);
DUET_C_API int64_t duet_tensor_dim(const duet_tensor* t, int i); /* 0 when i is out of range */
DUET_C_API int64_t duet_tensor_numel(const duet_tensor* t);
DUET_C_API size_t duet_tensor_nbytes(const duet_tensor* t);
/* The elements, dense row-major. */
DUET_C_API const void* duet_tensor_data(const duet_tensor* t);
DUET_C_API void* duet_tensor_mutable_data(duet_tensor* t);
/* Every element converted to float (f16/bf16 exactly, integers rounded). `count` must be at
 * least duet_tensor_numel(t). */
DUET_C_API duet_status duet_tensor_to_float(const duet_tensor* t, float* out, size_t count);

/* .safetensors files: one tensor by name, and writing several. */
DUET_C_API duet_status duet_tensor_load(const char* safetensors_path, const char* name,
                                        duet_tensor** out);
DUET_C_API duet_status duet_tensors_save(const char* safetensors_path, const char* const* names,
                                         const duet_tensor* const* tensors, size_t count);

/* ---- graphs ---------------------------------------------------------------------------- */

typedef struct duet_graph duet_graph;

/* A graph file: duet-graph JSON (constants' .safetensors files are read relative to it) or an
 * ONNX model (told apart by content; its symbolic dimensions are 1). */
DUET_C_API duet_status duet_graph_load(const char* path, duet_graph** out);
/* An ONNX model with the sizes of its symbolic dimensions: `dims` is "batch=2,sequence=7" (NULL
 * or "": every symbolic dimension is 1). An ONNX graph is specialised to its input shapes when
 * loaded (its shape arithmetic folds); run with other shapes, the engine plans again with the
 * model imported again from its file at them (the file must still be there). */
DUET_C_API duet_status duet_graph_load_onnx(const char* path, const char* dims, duet_graph** out);
/* A graph from JSON text; `base_dir` (may be NULL: ".") resolves constants' files. */
DUET_C_API duet_status duet_graph_parse(const char* json, const char* base_dir, duet_graph** out);
DUET_C_API void duet_graph_destroy(duet_graph* g);

DUET_C_API const char* duet_graph_name(const duet_graph* g);
DUET_C_API size_t duet_graph_input_count(const duet_graph* g);
DUET_C_API const char* duet_graph_input_name(const duet_graph* g, size_t i); /* NULL: bad i */
DUET_C_API size_t duet_graph_output_count(const duet_graph* g);
DUET_C_API const char* duet_graph_output_name(const duet_graph* g, size_t i);
/* Gives a constant declared without data its values (copied; dtype and shape must match). */
DUET_C_API duet_status duet_graph_bind_constant(duet_graph* g, const char* name,
                                                const duet_tensor* data);

/* ---- devices --------------------------------------------------------------------------- */

/* This machine's devices (opened once per process) and every backend that could not be opened
 * with the reason, as JSON (what `duet devices --json` prints). */
DUET_C_API duet_status duet_devices_json(char** out);

/* ---- plans (what would run where, and why) --------------------------------------------- */

typedef struct duet_plan duet_plan;

/* Plans `g` for this machine's devices (`profiles` NULL or "") or for capability profiles
 * ("rtx2080ti,rtx3090": no hardware needed) under `policy` (see "Policies" below). */
DUET_C_API duet_status duet_plan_create(const duet_graph* g, const char* profiles,
                                        const char* policy, duet_plan** out);
DUET_C_API void duet_plan_destroy(duet_plan* p);

/* One kernel of a plan. The strings live as long as the plan. */
typedef struct duet_plan_op {
  const char* name;      /* the graph node ("attn"), or an inserted cast's name */
  const char* op;        /* "attention" */
  const char* device;    /* "cuda:0" */
  const char* precision; /* "f16" */
  const char* tier;      /* "tiled" */
  double estimate_us;    /* the cost model's estimate */
} duet_plan_op;

DUET_C_API size_t duet_plan_op_count(const duet_plan* p);
DUET_C_API duet_status duet_plan_op_info(const duet_plan* p, size_t i, duet_plan_op* out);
/* Every decision with its reason and the alternatives rejected (`duet plan --explain`). */
DUET_C_API duet_status duet_plan_explain(const duet_plan* p, char** out);

/* ---- engines --------------------------------------------------------------------------- */

typedef struct duet_engine duet_engine;

/* Plans `g` (copied: the graph may be destroyed afterwards) for this machine's devices and
 * prepares it to run: constants uploaded, buffers allocated.
 *
 * Policies: `policy` is a policy string ("deny=cuda.flash;precision=f32", syntax in
 * docs/planner.md). NULL means the DUET_POLICY environment variable (or no overrides when it is
 * unset); a string, even "", is used as given and DUET_POLICY is not read. */
DUET_C_API duet_status duet_engine_create(const duet_graph* g, const char* policy,
                                          duet_engine** out);
DUET_C_API void duet_engine_destroy(duet_engine* e);

/* Runs the graph. Inputs by name (every graph input, each of its declared dtype; other shapes
 * re-plan). On success `outputs[i]` receives a new tensor for the graph's i-th output
 * (duet_graph_output_name order); `output_count` must equal the graph's output count. On failure
 * no output is written. */
DUET_C_API duet_status duet_engine_run(duet_engine* e, const char* const* input_names,
                                       const duet_tensor* const* inputs, size_t input_count,
                                       duet_tensor** outputs, size_t output_count);
/* The graph's outputs as the engine returns them (the order of duet_graph_output_name). */
DUET_C_API size_t duet_engine_output_count(const duet_engine* e);
DUET_C_API const char* duet_engine_output_name(const duet_engine* e, size_t i); /* NULL: bad i */
/* The engine's current plan in words (as duet_plan_explain). */
DUET_C_API duet_status duet_engine_explain(duet_engine* e, char** out);

/* ---- device memory (CUDA) ---------------------------------------------------------------
 *
 * Runs on memory the caller owns on a CUDA device, with outputs left there: no copy between host
 * and device for either. A duet_device_tensor is a dense row-major tensor in a device's memory:
 * the caller's memory (duet_device_tensor_adopt; duet never frees it) or an output a run left on
 * the device (duet's memory, freed for reuse when the handle is destroyed).
 *
 * Streams: duet works on one stream per device (duet_engine_device_stream). The caller's writes
 * to an input must be complete, or ordered before duet's stream (cudaEventRecord on the caller's
 * stream, cudaStreamWaitEvent on duet's), when duet_engine_run_device is called. When it returns,
 * successfully or not, duet has no work left that reads the inputs or writes the outputs: the
 * outputs are ready on every stream, and the inputs' memory may be written or freed. An output's
 * memory stays valid until its handle is destroyed; work the caller queued that still uses it
 * then must be named first with duet_device_tensor_release_after (else duet may reuse the memory
 * while that work runs).
 *
 * Devices other than CUDA devices take host tensors only (DUET_ERROR_UNSUPPORTED here). */

typedef struct duet_device_tensor duet_device_tensor;

/* The caller's memory on `device` ("cuda:0", an id of duet_devices_json) as a tensor of `dtype`
 * (f32, f16, bf16, i8 or i32) and `shape`, used in place: `address` is a device pointer
 * (cudaMalloc's, another library's), aligned to the element size, with at least
 * numel * element size `bytes`. Keep the memory allocated while the handle lives. */
DUET_C_API duet_status duet_device_tensor_adopt(const char* device, void* address, size_t bytes,
                                                duet_dtype dtype, const int64_t* shape, int rank,
                                                duet_device_tensor** out);
DUET_C_API void duet_device_tensor_destroy(duet_device_tensor* t);
/* The device pointer of element 0, the device's id, and the tensor's dtype and shape. */
DUET_C_API void* duet_device_tensor_data(const duet_device_tensor* t);
DUET_C_API const char* duet_device_tensor_device(const duet_device_tensor* t);
DUET_C_API duet_dtype duet_device_tensor_dtype(const duet_device_tensor* t);
DUET_C_API int duet_device_tensor_rank(const duet_device_tensor* t);
DUET_C_API int64_t duet_device_tensor_dim(const duet_device_tensor* t, int i); /* 0: bad i */
DUET_C_API size_t duet_device_tensor_nbytes(const duet_device_tensor* t);
/* Work queued on `stream` (a cudaStream_t; 1 and 2 are CUDA's legacy and per-thread default
 * streams) uses the output `t`: once the handle is destroyed, duet does not reuse its memory
 * before the work queued on `stream` by then has completed (it does not wait for it: the memory
 * comes back as duet later allocates). Call it for each stream, before destroying the handle.
 * Does nothing for the caller's own memory (adopted). */
DUET_C_API duet_status duet_device_tensor_release_after(duet_device_tensor* t, uint64_t stream);

/* duet's stream on `device` (a cudaStream_t), for ordering the caller's work before duet's. */
DUET_C_API duet_status duet_engine_device_stream(duet_engine* e, const char* device, uint64_t* out);

/* duet_engine_run with inputs in device memory beside the host ones: every graph input given
 * once, on the host (`inputs`) or on the device (`device_inputs`, read in place on the device the
 * engine's plan reads it on; one elsewhere is refused, naming the input and both devices).
 * `keep_outputs_on_device` nonzero keeps each output a kernel writes on a CUDA device there. On
 * success, for each graph output i (duet_engine_output_name order), exactly one of
 * `host_outputs[i]` and `device_outputs[i]` receives a new handle, the other NULL; both arrays
 * hold `output_count` entries. On failure no output is written. */
DUET_C_API duet_status duet_engine_run_device(duet_engine* e, const char* const* input_names,
                                              const duet_tensor* const* inputs, size_t input_count,
                                              const char* const* device_input_names,
                                              const duet_device_tensor* const* device_inputs,
                                              size_t device_input_count, int keep_outputs_on_device,
                                              duet_tensor** host_outputs,
                                              duet_device_tensor** device_outputs,
                                              size_t output_count);

/* ---- distributed runs (docs/distributed.md) ---------------------------------------------
 *
 * A graph split in pipeline stages over the ranks of an MPI run: the program is started by
 * `mpirun -np N app ...`, and every rank calls duet_dist_create with the same graph (checked at
 * start: same duet build, same graph structure). Rank 0 then calls duet_dist_run (as
 * duet_engine_run) and, when done, duet_dist_finish; every other rank calls duet_dist_serve,
 * which follows rank 0's runs and returns when rank 0 finishes. Each rank keeps only its stage's
 * weights and states (KV caches) on its own devices. In a build without MPI every function fails
 * with DUET_ERROR_UNSUPPORTED.
 *
 * Faults: a wait for another rank longer than the timeout fails with a message naming both ranks
 * and the step; a rank that cannot go on calls duet_dist_abort, which ends every rank. */

typedef struct duet_dist duet_dist;

/* Collective. Starts MPI unless the application did (then it is the application's to finalize;
 * otherwise duet_dist_destroy finalizes it). `policy`: as duet_engine_create's, for every rank's
 * planning. `every_rank`: nonzero puts a stage on every rank even where fewer are estimated
 * faster. `timeout_s`: the longest wait for another rank once started (<= 0: DUET_DIST_TIMEOUT,
 * else 120 s). */
DUET_C_API duet_status duet_dist_create(const duet_graph* g, const char* policy, int every_rank,
                                        double timeout_s, duet_dist** out);
DUET_C_API void duet_dist_destroy(duet_dist* d);
DUET_C_API int duet_dist_rank(const duet_dist* d); /* -1 for NULL */
DUET_C_API int duet_dist_size(const duet_dist* d); /* 0 for NULL */
/* Rank 0: one run over every stage, as duet_engine_run (outputs in duet_graph_output_name order).
 */
DUET_C_API duet_status duet_dist_run(duet_dist* d, const char* const* input_names,
                                     const duet_tensor* const* inputs, size_t input_count,
                                     duet_tensor** outputs, size_t output_count);
/* Rank 0: every rank's states (KV caches) back to zero. */
DUET_C_API duet_status duet_dist_reset_states(duet_dist* d);
/* Rank 0: the other ranks return from duet_dist_serve (collective with them). */
DUET_C_API duet_status duet_dist_finish(duet_dist* d);
/* Other ranks: follow rank 0's runs until it calls duet_dist_finish. */
DUET_C_API duet_status duet_dist_serve(duet_dist* d);
/* Rank 0: the stage plan in words (ranks, links, stages, crossings, MPI library). */
DUET_C_API duet_status duet_dist_explain(const duet_dist* d, char** out);
/* Ends every rank of the run at once (MPI_Abort) after printing `message` as this rank's error;
 * does not return. */
DUET_C_API void duet_dist_abort(duet_dist* d, const char* message);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DUET_DUET_H */
