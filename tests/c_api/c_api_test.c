/* The C API of include/fusionopt/runtime.h from a C program, as an application would use it:
 * a session over a model file, its metadata, a run checked against the same model run op by
 * op, optimizing in memory and running the result, an output lent out as DLPack, and every
 * kind of bad input answered with its status and a one-line message. Usage: c_api_test MODEL.onnx (float input "input", N
 * symbolic, output "logits"). Prints one line per check; exits 1 at the first failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlpack/dlpack.h>

#include "fusionopt/runtime.h"

static int checks = 0;

#define EXPECT(condition, ...)                                 \
  do {                                                         \
    ++checks;                                                  \
    if (!(condition)) {                                        \
      fprintf(stderr, "FAILED %s:%d: ", __FILE__, __LINE__);   \
      fprintf(stderr, __VA_ARGS__);                            \
      fprintf(stderr, " (last error: %s)\n", fusionopt_last_error()); \
      exit(1);                                                 \
    }                                                          \
  } while (0)

static char* ReadFile(const char* path, size_t* size) {
  FILE* file = fopen(path, "rb");
  if (file == NULL) return NULL;
  fseek(file, 0, SEEK_END);
  long length = ftell(file);
  fseek(file, 0, SEEK_SET);
  char* bytes = malloc((size_t)length);
  *size = fread(bytes, 1, (size_t)length, file);
  fclose(file);
  return bytes;
}

/* Runs `session` on `input` ([2,3,32,32]) and returns the logits' values (malloc'ed). */
static float* Logits(fusionopt_session* session, const float* input, size_t* count) {
  int64_t dims[4] = {2, 3, 32, 32};
  fusionopt_tensor feed = {"input", 1, 4, dims, input};
  fusionopt_value* output = NULL;
  fusionopt_status status = fusionopt_session_run(session, &feed, 1, NULL, 1, &output);
  EXPECT(status == FUSIONOPT_OK, "run: %s", fusionopt_status_name(status));
  EXPECT(strcmp(fusionopt_value_name(output), "logits") == 0, "output name %s", fusionopt_value_name(output));
  EXPECT(fusionopt_value_dtype(output) == 1 && fusionopt_value_rank(output) == 2, "logits float rank 2");
  EXPECT(fusionopt_value_dims(output)[0] == 2, "batch 2, got %lld", (long long)fusionopt_value_dims(output)[0]);
  fusionopt_value_view view;
  fusionopt_value_view_of(output, &view);
  EXPECT(view.data == fusionopt_value_data(output) && view.bytes == fusionopt_value_bytes(output) &&
             view.rank == 2 && view.dims[1] == fusionopt_value_dims(output)[1] && strcmp(view.name, "logits") == 0,
         "the view says what the single calls say");
  *count = fusionopt_value_bytes(output) / sizeof(float);
  float* values = malloc(fusionopt_value_bytes(output));
  memcpy(values, fusionopt_value_data(output), fusionopt_value_bytes(output));
  fusionopt_value_free(output);
  return values;
}

/* The run options and DLPack on a CPU session: device memory is refused either way, and an
 * output lent out as a DLManagedTensor outlives both its value and its session. */
static void CheckDlpackAndPlacement(const char* model, const float* input, const float* expected, size_t count) {
  fusionopt_session* session = NULL;
  EXPECT(fusionopt_session_create(model, NULL, &session) == FUSIONOPT_OK, "session for DLPack");
  EXPECT(fusionopt_session_cuda_stream(session) == NULL, "a CPU session has no CUDA stream");
  int64_t dims[4] = {2, 3, 32, 32};
  fusionopt_tensor feed = {"input", 1, 4, dims, input};
  fusionopt_value* output = NULL;
  fusionopt_run_options options = fusionopt_run_options_default();
  int32_t on_device[1] = {FUSIONOPT_MEMORY_CUDA};
  options.input_memory = on_device;
  EXPECT(fusionopt_session_run_with_options(session, &options, &feed, 1, NULL, 1, &output) == FUSIONOPT_USAGE &&
             strstr(fusionopt_last_error(), "'input' is in CUDA memory") != NULL && output == NULL,
         "a CPU session refuses an input in device memory");
  options.input_memory = NULL;
  options.output_memory = FUSIONOPT_MEMORY_CUDA;
  EXPECT(fusionopt_session_run_with_options(session, &options, &feed, 1, NULL, 1, &output) == FUSIONOPT_USAGE &&
             strstr(fusionopt_last_error(), "host memory") != NULL,
         "a CPU session refuses to leave outputs in device memory");
  options.output_memory = 7;
  EXPECT(fusionopt_session_run_with_options(session, &options, &feed, 1, NULL, 1, &output) == FUSIONOPT_USAGE &&
             strstr(fusionopt_last_error(), "memory kind 7") != NULL,
         "an unknown memory kind is named");
  options.output_memory = FUSIONOPT_MEMORY_HOST;
  options.struct_size = 4;
  EXPECT(fusionopt_session_run_with_options(session, &options, &feed, 1, NULL, 1, &output) == FUSIONOPT_USAGE &&
             strstr(fusionopt_last_error(), "struct_size 4") != NULL,
         "a struct_size older than the fields read is refused");
  options = fusionopt_run_options_default();
  EXPECT(fusionopt_session_run_with_options(session, &options, &feed, 1, NULL, 1, &output) == FUSIONOPT_OK &&
             fusionopt_value_memory(output) == FUSIONOPT_MEMORY_HOST,
         "host in, host out");

  DLManagedTensor* lent = NULL;
  EXPECT(fusionopt_value_to_dlpack(output, (void**)&lent) == FUSIONOPT_OK && lent != NULL, "lent as DLPack");
  DLManagedTensor* second = NULL;
  EXPECT(fusionopt_value_to_dlpack(output, (void**)&second) == FUSIONOPT_OK, "lent twice");
  EXPECT(lent->dl_tensor.device.device_type == kDLCPU && lent->dl_tensor.ndim == 2 &&
             lent->dl_tensor.shape[0] == 2 && lent->dl_tensor.dtype.code == kDLFloat &&
             lent->dl_tensor.dtype.bits == 32 && lent->dl_tensor.dtype.lanes == 1 && lent->dl_tensor.strides == NULL,
         "a 2-D float32 host tensor, dense");
  EXPECT(lent->dl_tensor.data == fusionopt_value_data(output) && second->dl_tensor.data == lent->dl_tensor.data,
         "the same memory, no copy");
  /* The value and the session go first; the lent tensor still reads the results. */
  fusionopt_value_free(output);
  fusionopt_session_destroy(session);
  size_t lent_count = (size_t)(lent->dl_tensor.shape[0] * lent->dl_tensor.shape[1]);
  EXPECT(lent_count == count, "lent tensor size");
  const float* lent_values = (const float*)((const char*)lent->dl_tensor.data + lent->dl_tensor.byte_offset);
  for (size_t i = 0; i < count; ++i) {
    EXPECT(fabs((double)lent_values[i] - (double)expected[i]) <= 1e-5 + 1e-4 * fabs((double)expected[i]),
           "lent value %zu", i);
  }
  second->deleter(second);
  lent->deleter(lent);
  EXPECT(fusionopt_value_to_dlpack(NULL, (void**)&lent) == FUSIONOPT_USAGE, "a NULL value");
}

static void ExpectClose(const float* a, const float* b, size_t count, const char* what) {
  double worst = 0;
  for (size_t i = 0; i < count; ++i) {
    double error = fabs((double)a[i] - (double)b[i]) / (1e-5 + 1e-4 * fabs((double)b[i]));
    if (error > worst) worst = error;
  }
  EXPECT(worst <= 1.0, "%s: outputs differ (worst %.3g of the tolerance)", what, worst);
}

int main(int argc, char** argv) {
  EXPECT(argc == 2, "usage: c_api_test MODEL.onnx");
  EXPECT(fusionopt_api_version() == FUSIONOPT_RUNTIME_API_VERSION, "API version %u", fusionopt_api_version());
  fusionopt_set_log_level(0);

  fusionopt_session* fused = NULL;
  EXPECT(fusionopt_session_create(argv[1], NULL, &fused) == FUSIONOPT_OK, "session over %s", argv[1]);
  EXPECT(fusionopt_session_input_count(fused) == 1 && fusionopt_session_output_count(fused) == 1, "one input, one output");
  fusionopt_value_info info;
  EXPECT(fusionopt_session_input(fused, 0, &info) == FUSIONOPT_OK, "input info");
  EXPECT(strcmp(info.name, "input") == 0 && info.dtype == 1 && info.rank == 4, "input float rank 4");
  EXPECT(info.dims[0] == -1 && strcmp(info.dim_symbols[0], "N") == 0 && info.dims[1] == 3, "input dims [N,3,...]");
  EXPECT(fusionopt_session_input(fused, 1, &info) == FUSIONOPT_USAGE, "input 1 of 1 is a usage error");

  float* input = malloc(sizeof(float) * 2 * 3 * 32 * 32);
  for (int i = 0; i < 2 * 3 * 32 * 32; ++i) input[i] = (float)sin(0.37 * i);

  /* The same model op by op is the reference. */
  fusionopt_session_options options = fusionopt_session_options_default();
  options.fused_kernels = 0;
  options.threads = 1;
  fusionopt_session* op_by_op = NULL;
  EXPECT(fusionopt_session_create(argv[1], &options, &op_by_op) == FUSIONOPT_OK, "op-by-op session");
  size_t count = 0, reference_count = 0;
  float* logits = Logits(fused, input, &count);
  float* reference = Logits(op_by_op, input, &reference_count);
  EXPECT(count == reference_count && count > 0, "same output size");
  ExpectClose(logits, reference, count, "fused against op by op");

  CheckDlpackAndPlacement(argv[1], input, logits, count);

  /* Optimized in memory at -O3, then run from the bytes. */
  size_t size = 0;
  char* bytes = ReadFile(argv[1], &size);
  EXPECT(bytes != NULL, "read %s", argv[1]);
  fusionopt_buffer* optimized = NULL;
  fusionopt_buffer* report = NULL;
  EXPECT(fusionopt_optimize(bytes, size, NULL, "{\"level\": 3, \"verify\": true}", &optimized, &report) == FUSIONOPT_OK,
         "optimize");
  EXPECT(strstr((const char*)fusionopt_buffer_data(report), "\"passes\"") != NULL, "the report lists the passes");
  fusionopt_session* from_bytes = NULL;
  EXPECT(fusionopt_session_create_from_bytes(fusionopt_buffer_data(optimized), fusionopt_buffer_size(optimized), NULL,
                                             NULL, &from_bytes) == FUSIONOPT_OK,
         "session over the optimized bytes");
  size_t optimized_count = 0;
  float* optimized_logits = Logits(from_bytes, input, &optimized_count);
  EXPECT(optimized_count == reference_count, "same output size after optimizing");
  ExpectClose(optimized_logits, reference, count, "optimized against the original op by op");

  /* Bad input: each a status with its category and a message naming the problem. */
  int64_t dims[4] = {2, 3, 32, 32};
  fusionopt_value* value = NULL;
  fusionopt_tensor wrong_name = {"pixels", 1, 4, dims, input};
  EXPECT(fusionopt_session_run(fused, &wrong_name, 1, NULL, 1, &value) == FUSIONOPT_INVALID_MODEL &&
             strstr(fusionopt_last_error(), "'pixels'") != NULL,
         "an unknown input is named");
  fusionopt_tensor wrong_dtype = {"input", 7, 4, dims, input};
  EXPECT(fusionopt_session_run(fused, &wrong_dtype, 1, NULL, 1, &value) == FUSIONOPT_INVALID_MODEL &&
             strstr(fusionopt_last_error(), "dtype") != NULL,
         "a wrong dtype is named");
  int64_t wrong_dims[4] = {2, 4, 32, 32};
  fusionopt_tensor wrong_shape = {"input", 1, 4, wrong_dims, input};
  EXPECT(fusionopt_session_run(fused, &wrong_shape, 1, NULL, 1, &value) == FUSIONOPT_INVALID_MODEL &&
             strstr(fusionopt_last_error(), "shape") != NULL,
         "a wrong shape is named");
  EXPECT(fusionopt_session_run(fused, NULL, 0, NULL, 1, &value) == FUSIONOPT_INVALID_MODEL &&
             strstr(fusionopt_last_error(), "not given") != NULL,
         "a missing input is named");
  const char* unknown_output[1] = {"probabilities"};
  fusionopt_tensor feed = {"input", 1, 4, dims, input};
  EXPECT(fusionopt_session_run(fused, &feed, 1, unknown_output, 1, &value) == FUSIONOPT_USAGE &&
             strstr(fusionopt_last_error(), "probabilities") != NULL,
         "an unknown output is named");
  fusionopt_session* missing = NULL;
  EXPECT(fusionopt_session_create("/nonexistent/model.onnx", NULL, &missing) == FUSIONOPT_IO && missing == NULL,
         "a missing file is an I/O error");
  EXPECT(fusionopt_session_create_from_bytes("not a model", 11, NULL, NULL, &missing) == FUSIONOPT_INVALID_MODEL,
         "garbage bytes are an invalid model");
  fusionopt_buffer* unused = NULL;
  EXPECT(fusionopt_optimize(bytes, size, NULL, "{\"levle\": 3}", &unused, NULL) == FUSIONOPT_USAGE &&
             strstr(fusionopt_last_error(), "levle") != NULL && unused == NULL,
         "an unknown option is named");
  EXPECT(fusionopt_optimize(bytes, size, NULL, "{\"level\": 9}", &unused, NULL) == FUSIONOPT_USAGE, "level 9");
  EXPECT(fusionopt_optimize(bytes, size, NULL, "[1, 2]", &unused, NULL) == FUSIONOPT_USAGE, "options not an object");
  EXPECT(fusionopt_session_create(NULL, NULL, &missing) == FUSIONOPT_USAGE, "a NULL path");
  EXPECT(fusionopt_session_run(fused, &feed, 1, NULL, 1, &value) == FUSIONOPT_OK && fusionopt_last_error()[0] == '\0',
         "a good run after bad ones clears the error");
  fusionopt_value_free(value);

  fusionopt_buffer_free(optimized);
  fusionopt_buffer_free(report);
  fusionopt_session_destroy(from_bytes);
  fusionopt_session_destroy(op_by_op);
  fusionopt_session_destroy(fused);
  fusionopt_session_destroy(NULL);
  free(bytes);
  free(input);
  free(logits);
  free(reference);
  free(optimized_logits);
  printf("c_api_test: %d checks passed on %s\n", checks, argv[1]);
  return 0;
}
