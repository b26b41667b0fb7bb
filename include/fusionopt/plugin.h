/*
 * libfusionopt_cuda: CUDA kernels for ONNX nodes — the ai.fusionopt fused nodes that
 * `fusionopt -O3` writes and the standard ops around them — behind a small C ABI.
 *
 * A host (fusionopt's own CUDA backend, or any inference engine) describes one node — its
 * serialized onnx.NodeProto, the onnx.FunctionProto it calls if it is a fused node, and the
 * dtype and static shape of every input and output — and gets back a kernel it can enqueue on
 * its CUDA stream with device pointers. Shapes are fixed when a kernel is built (index
 * arithmetic and broadcasting are folded into generated code); a host with new shapes builds
 * another kernel.
 *
 * Rules of the ABI:
 * - Every function returns an fo_status (or is a destroy/query that cannot fail). On failure,
 *   fo_last_error_message() holds one line saying what went wrong, for the calling thread.
 * - No C++ exception, and no CUDA error left pending, crosses this boundary.
 * - Structs passed in start with `struct_size` (set it to sizeof the struct as compiled) so
 *   later versions can append fields; FO_PLUGIN_ABI_VERSION changes only on breaking changes.
 * - A context and the kernels built from it are used by one thread at a time.
 * - dtype codes are ONNX's TensorProto.DataType values (1 float, 10 float16, 16 bfloat16,
 *   6 int32, 7 int64, 9 bool, ...).
 */
#ifndef FUSIONOPT_PLUGIN_H_
#define FUSIONOPT_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FO_PLUGIN_ABI_VERSION 1u

#if defined(__GNUC__)
#define FO_API __attribute__((visibility("default")))
#else
#define FO_API
#endif

typedef enum fo_status {
  FO_OK = 0,
  FO_INVALID_ARGUMENT = 1, /* null pointer, malformed protobuf, inconsistent shapes or dtypes */
  FO_UNSUPPORTED = 2,      /* a valid node this library has no kernel for */
  FO_CUDA_ERROR = 3,       /* CUDA, cuBLASLt or cuDNN failed: no device, out of memory, ... */
  FO_COMPILE_ERROR = 4,    /* NVRTC rejected a generated kernel (a bug in this library) */
  FO_INTERNAL_ERROR = 5    /* anything else; the message says what */
} fo_status;

typedef struct fo_context fo_context;
typedef struct fo_kernel fo_kernel;
typedef struct fo_graph fo_graph;

/* FO_PLUGIN_ABI_VERSION of the loaded library; a host checks it before anything else. */
FO_API uint32_t fo_abi_version(void);

/* "FO_OK", "FO_INVALID_ARGUMENT", ...; never NULL. */
FO_API const char* fo_status_name(fo_status status);

/* The message of the calling thread's last failed call; "" if none. Valid until the thread's
 * next call into the library. Every fo_status-returning call clears it on entry, so after a
 * successful call it is "" — except fo_node_supported answering 0, which leaves the reason. */
FO_API const char* fo_last_error_message(void);

/* ---- Contexts ------------------------------------------------------------------------- */

typedef struct fo_context_options {
  uint32_t struct_size;  /* sizeof(fo_context_options) */
  int32_t device;        /* CUDA device ordinal; -1: a compile-only context (below) */
  int32_t compile_arch;  /* compile-only contexts: the compute capability × 10 to generate
                            code for (80, 90, ...); 0 means 90. Ignored with a device. */
  void* stream;          /* cudaStream_t the kernels run on; NULL: a stream the context creates */
  const char* cache_dir; /* NVRTC cache folder; NULL: $XDG_CACHE_HOME/fusionopt/cuda or
                            ~/.cache/fusionopt/cuda; "": no disk cache */
  int32_t count_executed_kernels; /* nonzero: count executed kernels with CUPTI (includes
                                     those cuBLASLt and cuDNN launch); slower */
} fo_context_options;

/* Initializes CUDA on options->device; FO_CUDA_ERROR when there is no usable device.
 * A compile-only context (device -1) touches no GPU: fo_node_supported and fo_kernel_build
 * work — code is generated and compiled for compile_arch, library plans are chosen — so a
 * machine without a GPU can check what a model would run; fo_kernel_enqueue and the memory,
 * timer and graph functions return FO_CUDA_ERROR on it. */
FO_API fo_status fo_context_create(const fo_context_options* options, fo_context** context);
/* Waits for the stream, frees everything the context holds. NULL is ignored. Kernels built
 * from the context keep what they need of it (stream, handles, device), so kernels and their
 * context may be destroyed in either order; the rest is freed with the last of them. */
FO_API void fo_context_destroy(fo_context* context);

/* One line naming the device, its compute capability and the library versions in use. */
FO_API const char* fo_context_describe(const fo_context* context);

/* The cudaStream_t the context's kernels and copies run on (the one fo_context_options gave,
 * or the context's own): a host that hands the context memory another stream writes makes
 * this stream wait for that work first. NULL for a compile-only context or NULL. */
FO_API void* fo_context_stream(const fo_context* context);

typedef struct fo_counters {
  uint64_t launches;         /* kernel launches this library issued (every enqueue adds its kernel's
                                count; enqueues while capturing a graph count nothing, and each
                                fo_graph_replay adds the launches it captured) */
  uint64_t kernels_executed; /* CUPTI's count of kernels that ran; UINT64_MAX when not counted */
} fo_counters;

/* Counts since the context was created or last reset; synchronizes the stream first. */
FO_API fo_status fo_context_counters(fo_context* context, fo_counters* counters);
FO_API fo_status fo_context_reset_counters(fo_context* context);

/* What building kernels has cost this context so far: a host reports a model's first-inference
 * cost from it (planning, code generation, NVRTC, the disk cache). */
typedef struct fo_build_stats {
  uint32_t struct_size;         /* sizeof(fo_build_stats) */
  uint64_t kernels_built;       /* fo_kernel_build calls that returned FO_OK */
  uint64_t modules_compiled;    /* generated programs NVRTC compiled */
  uint64_t modules_from_cache;  /* generated programs read from the disk cache instead */
  double compile_seconds;       /* wall time in NVRTC and the cache */
  double build_seconds;         /* wall time in fo_kernel_build, everything included */
} fo_build_stats;

/* Fills the first stats->struct_size bytes of `stats` (struct_size at least that of the fields
 * through build_seconds). Touches no device; works on compile-only contexts. */
FO_API fo_status fo_context_build_stats(const fo_context* context, fo_build_stats* stats);

/* ---- Describing a node ---------------------------------------------------------------- */

typedef struct fo_tensor_desc {
  int32_t dtype;       /* ONNX TensorProto.DataType; 0 for an omitted optional input */
  int32_t rank;
  const int64_t* dims; /* `rank` static sizes, each >= 0 */
} fo_tensor_desc;

typedef struct fo_node_desc {
  uint32_t struct_size;     /* sizeof(fo_node_desc) */
  const void* node_proto;   /* serialized onnx.NodeProto */
  size_t node_proto_size;
  const void* function_proto; /* serialized onnx.FunctionProto the node calls (its domain and
                                 op_type); NULL for standard ops */
  size_t function_proto_size;
  int64_t default_opset;    /* the model's opset for the default ("" / ai.onnx) domain */
  size_t num_inputs;
  const fo_tensor_desc* inputs;
  const void* const* constant_inputs; /* NULL, or per input: host memory holding a constant
                                         input's data (an initializer), NULL where it is not
                                         constant; read during the build only */
  size_t num_outputs;
  const fo_tensor_desc* outputs;
} fo_node_desc;

/* *supported = 1 when fo_kernel_build would build a kernel for the node; 0 otherwise, with
 * the reason in fo_last_error_message(). Compiles nothing. */
FO_API fo_status fo_node_supported(fo_context* context, const fo_node_desc* node, int* supported);

/* Builds (generating and compiling code as needed; compiled code is cached on disk). */
FO_API fo_status fo_kernel_build(fo_context* context, const fo_node_desc* node, fo_kernel** kernel);
FO_API void fo_kernel_destroy(fo_kernel* kernel);

/* Device scratch memory fo_kernel_enqueue needs (0: pass NULL). */
FO_API fo_status fo_kernel_workspace_size(const fo_kernel* kernel, size_t* bytes);
/* Kernel launches one enqueue issues. */
FO_API fo_status fo_kernel_launch_count(const fo_kernel* kernel, uint32_t* launches);
/* One line: how the kernel is implemented ("generated elementwise, 4-wide vectors",
 * "cuBLASLt matmul, epilogue GELU_BIAS", ...). */
FO_API const char* fo_kernel_describe(const fo_kernel* kernel);

/* Enqueues the kernel on the context's stream. `inputs` and `outputs` hold one device
 * pointer per node input and output, in order (NULL for omitted optional ones); the memory
 * has the shapes and dtypes the kernel was built for. Returns without waiting. */
FO_API fo_status fo_kernel_enqueue(fo_kernel* kernel, const void* const* inputs, void* const* outputs,
                                   void* workspace);

/* ---- Memory and streams, for hosts without their own CUDA code -------------------------- */

FO_API fo_status fo_device_alloc(fo_context* context, size_t bytes, void** pointer);
FO_API fo_status fo_device_free(fo_context* context, void* pointer);
/* Copies on the context's stream; the host side must stay valid until fo_synchronize. */
FO_API fo_status fo_copy_to_device(fo_context* context, void* device, const void* host, size_t bytes);
FO_API fo_status fo_copy_to_host(fo_context* context, void* host, const void* device, size_t bytes);
FO_API fo_status fo_copy_device_to_device(fo_context* context, void* destination, const void* source, size_t bytes);
FO_API fo_status fo_synchronize(fo_context* context);

/* Milliseconds between two points of the stream, measured with CUDA events: call
 * fo_timer_start, enqueue work, then fo_timer_stop (which waits for the stream). */
FO_API fo_status fo_timer_start(fo_context* context);
FO_API fo_status fo_timer_stop(fo_context* context, float* milliseconds);

/* ---- CUDA Graphs ---------------------------------------------------------------------- */

/* Captures what is enqueued on the context's stream between begin and end into a graph that
 * fo_graph_replay launches as one unit. One capture at a time per context; the context holds
 * one graph of its own, which the next fo_graph_end_capture replaces. */
FO_API fo_status fo_graph_begin_capture(fo_context* context);
FO_API fo_status fo_graph_end_capture(fo_context* context);
FO_API fo_status fo_graph_replay(fo_context* context);
FO_API fo_status fo_graph_discard(fo_context* context);

/* Graphs a host keeps, as many as it likes (one per input shape, say): fo_graph_end_capture_new
 * ends the open capture into a new graph instead of the context's own (which is left as it
 * was), fo_graph_launch replays it on the context's stream (counted like fo_graph_replay), and
 * fo_graph_destroy frees it without waiting (a replay still running finishes first). A graph
 * keeps its context alive like a kernel does. NULL is ignored by destroy. */
FO_API fo_status fo_graph_end_capture_new(fo_context* context, fo_graph** graph);
FO_API fo_status fo_graph_launch(fo_graph* graph);
FO_API void fo_graph_destroy(fo_graph* graph);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FUSIONOPT_PLUGIN_H_ */
