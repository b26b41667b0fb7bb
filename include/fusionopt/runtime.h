/*
 * libfusionopt: fusionopt's optimizer and runtimes for programs — load an ONNX model, optimize
 * it, and run it on the CPU runtime or the CUDA backend, from C, C++ or any language with a C
 * foreign-function interface (the Python package `fusionopt` is one such client).
 *
 * Rules of the API (those of the plugin ABI, include/fusionopt/plugin.h):
 * - Every function that can fail returns a fusionopt_status; on failure
 *   fusionopt_last_error() holds one line naming the problem, for the calling thread, until
 *   that thread's next call into the library. Status codes are the CLI's exit codes.
 * - No C++ exception crosses this boundary. Bad input (a malformed model, an unknown option, a
 *   feed of the wrong name, dtype or shape, an op without a kernel) is a status, never a crash.
 * - Structs passed in start with `struct_size` (set it to sizeof the struct as compiled) so
 *   later versions can append fields; FUSIONOPT_RUNTIME_API_VERSION changes only on breaking
 *   changes. Check fusionopt_api_version() before anything else.
 * - dtype codes are ONNX's TensorProto.DataType values (1 float, 10 float16, 16 bfloat16,
 *   6 int32, 7 int64, 9 bool, ...). Data is laid out as in a TensorProto's raw_data: the 4- and
 *   2-bit types (uint4, int4, float4e2m1, uint2, int2) two or four values a byte, low bits first.
 * - A session may be used by one thread at a time; different sessions run in parallel.
 * - The CPU runtime's threads wait for work the way libgomp was told when it loaded
 *   (OMP_WAIT_POLICY): a process-wide choice a session cannot change.
 */
#ifndef FUSIONOPT_RUNTIME_H_
#define FUSIONOPT_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FUSIONOPT_RUNTIME_API_VERSION 1u

#if defined(__GNUC__)
#define FUSIONOPT_API __attribute__((visibility("default")))
#else
#define FUSIONOPT_API
#endif

typedef enum fusionopt_status {
  FUSIONOPT_OK = 0,
  FUSIONOPT_INVALID_MODEL = 1, /* malformed model, or feeds that contradict its declarations */
  FUSIONOPT_USAGE = 2,         /* a bad argument or option */
  FUSIONOPT_IO = 3,            /* a file cannot be read or written */
  FUSIONOPT_UNSUPPORTED = 4,   /* a valid model using something fusionopt cannot run or optimize */
  FUSIONOPT_MISMATCH = 5,      /* verification found the optimized model's outputs differ */
  FUSIONOPT_INTERNAL = 70      /* a bug in fusionopt; the message says what */
} fusionopt_status;

/* FUSIONOPT_RUNTIME_API_VERSION of the loaded library. */
FUSIONOPT_API uint32_t fusionopt_api_version(void);
/* The library's version, "0.1.0". */
FUSIONOPT_API const char* fusionopt_version(void);
/* "FUSIONOPT_OK", "FUSIONOPT_INVALID_MODEL", ...; never NULL. */
FUSIONOPT_API const char* fusionopt_status_name(fusionopt_status status);
/* The calling thread's last error message; "" after a successful call. */
FUSIONOPT_API const char* fusionopt_last_error(void);
/* How much the library logs to stderr: 0 errors only, 1 warnings (the default), 2 info, 3 debug. */
FUSIONOPT_API void fusionopt_set_log_level(int32_t level);

/* ---- Buffers the library hands out ----------------------------------------------------- */

typedef struct fusionopt_buffer fusionopt_buffer;
FUSIONOPT_API const void* fusionopt_buffer_data(const fusionopt_buffer* buffer);
FUSIONOPT_API size_t fusionopt_buffer_size(const fusionopt_buffer* buffer);
/* NULL is ignored. */
FUSIONOPT_API void fusionopt_buffer_free(fusionopt_buffer* buffer);

/* ---- Optimizing ------------------------------------------------------------------------ */

/* Optimizes a serialized ModelProto (external data is resolved against `base_dir`, which may be
 * NULL for a self-contained model) and returns the optimized ModelProto and the report (JSON:
 * per-pass statistics, every fusion, and the checks that ran). `options_json` is NULL or a JSON
 * object with the CLI's options as keys:
 *   {"level": 3, "runtime": "portable"|"ort", "target": "h100"|"cpu"|..., "dims": {"batch": 8},
 *    "strict_dims": false, "verify": false, "verify_runs": 2, "verify_seed": 0, "rtol": 1e-4,
 *    "atol": 1e-5, "disable": ["pass", ...], "only": ["pass", ...],
 *    "pass_options": {"pass.option": "value"}, "max_horizontal": 4, "fusion_timing": true}
 * An unknown key is FUSIONOPT_USAGE. A model above protobuf's 2 GiB limit cannot be returned
 * in memory: fusionopt_optimize_file writes it with external data. */
FUSIONOPT_API fusionopt_status fusionopt_optimize(const void* model, size_t model_size, const char* base_dir,
                                                  const char* options_json, fusionopt_buffer** optimized,
                                                  fusionopt_buffer** report_json);
/* The same from a file to a file; large tensors go to a side file OUTPUT.data when the model
 * needs it (above 2 GiB) or `external_data` is nonzero. Nothing is written on failure. */
FUSIONOPT_API fusionopt_status fusionopt_optimize_file(const char* input_path, const char* output_path,
                                                       const char* options_json, int32_t external_data,
                                                       fusionopt_buffer** report_json);

/* ---- Sessions -------------------------------------------------------------------------- */

typedef enum fusionopt_device { FUSIONOPT_DEVICE_CPU = 0, FUSIONOPT_DEVICE_CUDA = 1 } fusionopt_device;

typedef struct fusionopt_session_options {
  uint32_t struct_size;    /* sizeof(fusionopt_session_options) */
  int32_t device;          /* a fusionopt_device */
  int32_t threads;         /* CPU: intra-op threads; 0: every core the process may use */
  int32_t cuda_device;     /* CUDA: device ordinal */
  int32_t cuda_graph;      /* CUDA: nonzero replays one captured inference per input shape */
  int32_t fused_kernels;   /* CPU: 0 runs fused nodes' bodies op by op (for comparisons); else 1 */
} fusionopt_session_options;

/* The defaults: CPU, every core, fused kernels. */
FUSIONOPT_API fusionopt_session_options fusionopt_session_options_default(void);

typedef struct fusionopt_session fusionopt_session;

/* A session over a model file, or over a serialized ModelProto (external data resolved against
 * `base_dir`, or NULL). `options` NULL takes the defaults. Every node gets its kernel here: an
 * op without one is FUSIONOPT_UNSUPPORTED, naming it. */
FUSIONOPT_API fusionopt_status fusionopt_session_create(const char* model_path, const fusionopt_session_options* options,
                                                        fusionopt_session** session);
FUSIONOPT_API fusionopt_status fusionopt_session_create_from_bytes(const void* model, size_t model_size,
                                                                   const char* base_dir,
                                                                   const fusionopt_session_options* options,
                                                                   fusionopt_session** session);
/* NULL is ignored. */
FUSIONOPT_API void fusionopt_session_destroy(fusionopt_session* session);
/* "CPU runtime, every core", or the CUDA device with its compute capability. Valid as long as
 * the session. */
FUSIONOPT_API const char* fusionopt_session_describe(const fusionopt_session* session);

/* A declared input or output. `dims[i]` is -1 for a dim the model leaves open, and
 * `dim_symbols[i]` its symbol ("" when anonymous or known). rank is -1 when the model declares
 * no shape at all. Pointers stay valid as long as the session. */
typedef struct fusionopt_value_info {
  const char* name;
  int32_t dtype;
  int32_t rank;
  const int64_t* dims;
  const char* const* dim_symbols;
} fusionopt_value_info;

FUSIONOPT_API size_t fusionopt_session_input_count(const fusionopt_session* session);
FUSIONOPT_API size_t fusionopt_session_output_count(const fusionopt_session* session);
FUSIONOPT_API fusionopt_status fusionopt_session_input(const fusionopt_session* session, size_t index,
                                                       fusionopt_value_info* info);
FUSIONOPT_API fusionopt_status fusionopt_session_output(const fusionopt_session* session, size_t index,
                                                        fusionopt_value_info* info);

/* A tensor the caller owns: `data` holds the elements, dense and row-major, in host memory (a
 * CUDA session copies them to its device) unless fusionopt_run_options says otherwise. */
typedef struct fusionopt_tensor {
  const char* name;
  int32_t dtype;
  int32_t rank;
  const int64_t* dims;
  const void* data;
} fusionopt_tensor;

/* Where a tensor's bytes lie: host memory, or the CUDA device of a CUDA session. */
typedef enum fusionopt_memory { FUSIONOPT_MEMORY_HOST = 0, FUSIONOPT_MEMORY_CUDA = 1 } fusionopt_memory;

/* A result the library owns until fusionopt_value_free. */
typedef struct fusionopt_value fusionopt_value;
FUSIONOPT_API const char* fusionopt_value_name(const fusionopt_value* value);
FUSIONOPT_API int32_t fusionopt_value_dtype(const fusionopt_value* value);
FUSIONOPT_API int32_t fusionopt_value_rank(const fusionopt_value* value);
FUSIONOPT_API const int64_t* fusionopt_value_dims(const fusionopt_value* value);
/* Host memory, dense and row-major; NULL for an empty tensor. */
FUSIONOPT_API const void* fusionopt_value_data(const fusionopt_value* value);
FUSIONOPT_API size_t fusionopt_value_bytes(const fusionopt_value* value);
/* All of the above in one call (language bindings pay per call). Pointers stay valid until
 * fusionopt_value_free. */
typedef struct fusionopt_value_view {
  const char* name;
  int32_t dtype;
  int32_t rank;
  const int64_t* dims;
  const void* data; /* NULL for an empty tensor */
  size_t bytes;
} fusionopt_value_view;
FUSIONOPT_API void fusionopt_value_view_of(const fusionopt_value* value, fusionopt_value_view* view);
/* FUSIONOPT_MEMORY_HOST, or FUSIONOPT_MEMORY_CUDA for an output a CUDA session left on its
 * device (fusionopt_run_options.output_memory): `data` is then a device pointer. */
FUSIONOPT_API int32_t fusionopt_value_memory(const fusionopt_value* value);
/* NULL is ignored. A device value's memory stays valid after its session is destroyed. */
FUSIONOPT_API void fusionopt_value_free(fusionopt_value* value);

/* The value as a DLPack tensor (dlpack/dlpack.h, DLPACK_VERSION 0.6 and later: a
 * DLManagedTensor*), sharing the value's memory without a copy: host memory is kDLCPU, a CUDA
 * value kDLCUDA on its session's device. The tensor holds its own reference to the memory —
 * `value` stays the caller's to free, before or after — and its deleter releases it. */
FUSIONOPT_API fusionopt_status fusionopt_value_to_dlpack(const fusionopt_value* value, void** dl_managed_tensor);

/* One inference. Every declared input is fed once, by name (a feed may also override an
 * initializer that is a graph input). `output_names` selects outputs (NULL: all, in the
 * graph's order) and `outputs` receives `output_count` values in that order, which the caller
 * frees. A missing or unknown input, a dtype or shape that contradicts the declaration, and an
 * unknown output name are FUSIONOPT_INVALID_MODEL or FUSIONOPT_USAGE with the name in the
 * message; on failure no value is returned. */
FUSIONOPT_API fusionopt_status fusionopt_session_run(fusionopt_session* session, const fusionopt_tensor* inputs,
                                                     size_t input_count, const char* const* output_names,
                                                     size_t output_count, fusionopt_value** outputs);

/* Where fusionopt_session_run_with_options finds its inputs and leaves its outputs. Device
 * memory (FUSIONOPT_MEMORY_CUDA) is accepted by CUDA sessions only: inputs on the session's
 * device are copied device to device (they must be dense and row-major, and whatever writes
 * them on another stream must be ordered before fusionopt_session_cuda_stream), and device
 * outputs are fresh device buffers the values own. A CPU session refuses device memory with
 * FUSIONOPT_USAGE. */
typedef struct fusionopt_run_options {
  uint32_t struct_size;         /* sizeof(fusionopt_run_options) */
  const int32_t* input_memory;  /* one fusionopt_memory per entry of `inputs`; NULL: all host */
  int32_t output_memory;        /* a fusionopt_memory for every output */
} fusionopt_run_options;

/* The defaults: every input and output in host memory. */
FUSIONOPT_API fusionopt_run_options fusionopt_run_options_default(void);

/* fusionopt_session_run with inputs or outputs in device memory; `options` NULL is
 * fusionopt_session_run. The run has finished on the device when it returns. */
FUSIONOPT_API fusionopt_status fusionopt_session_run_with_options(fusionopt_session* session,
                                                                  const fusionopt_run_options* options,
                                                                  const fusionopt_tensor* inputs, size_t input_count,
                                                                  const char* const* output_names, size_t output_count,
                                                                  fusionopt_value** outputs);

/* The cudaStream_t a CUDA session copies and computes on; NULL for a CPU session. */
FUSIONOPT_API void* fusionopt_session_cuda_stream(const fusionopt_session* session);

#ifdef __cplusplus
}
#endif

#endif /* FUSIONOPT_RUNTIME_H_ */
