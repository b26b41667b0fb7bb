// oneDNN 2.6's matmul (what the CPU runtime runs, constant B stored column-major) against
// MKL's sgemm and MKL's packed sgemm (B packed once, as a runtime would pack constant weights)
// on the real corpus's GEMM shapes, in one run (issue 15, item 2: the library chosen by
// measurement). Each shape is timed with B warm in cache (one B, reused) and cold (eight
// distinct Bs in turn, as a model's layers stream their weights).
//
// MKL is not a dependency of fusionopt; this benchmark builds only when pointed at one:
//   python3 -m venv /tmp/mkl && /tmp/mkl/bin/pip install mkl-devel
//   cmake -S . -B build -DFUSIONOPT_MKL_ROOT=/tmp/mkl && make -C build fusionopt_bench_gemm_libraries
//   build/fusionopt_bench_gemm_libraries [THREADS]
#include <dnnl.hpp>
#include <mkl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace {

using dnnl::memory;

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best over 6 blocks of the mean time of `run(copy)` over `copies` copies in turn.
double BestSeconds(int copies, const std::function<void(int)>& run) {
  for (int copy = 0; copy < copies; ++copy) run(copy);
  double best = 1e30;
  for (int block = 0; block < 6; ++block) {
    const double start = Seconds();
    for (int copy = 0; copy < copies; ++copy) run(copy);
    best = std::min(best, (Seconds() - start) / copies);
  }
  return best;
}

struct Shape {
  int m, k, n;
  const char* where;
};

void Compare(const Shape& shape, int copies, dnnl::engine& engine, dnnl::stream& stream) {
  const int m = shape.m, k = shape.k, n = shape.n;
  std::vector<float> a(static_cast<size_t>(m) * k, 0.5f), c(static_cast<size_t>(m) * n);
  // B column-major: b[j * k + i] is B(i, j), the runtime's storage of constant weights.
  std::vector<std::vector<float>> b(copies, std::vector<float>(static_cast<size_t>(k) * n, 0.25f));
  const memory::desc a_desc({m, k}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc b_desc({k, n}, memory::data_type::f32, memory::format_tag::ba);
  const memory::desc c_desc({m, n}, memory::data_type::f32, memory::format_tag::ab);
  dnnl::matmul matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_desc, b_desc, c_desc), engine));
  memory a_memory(a_desc, engine, a.data()), c_memory(c_desc, engine, c.data());
  std::vector<memory> b_memory;
  for (auto& copy : b) b_memory.emplace_back(b_desc, engine, copy.data());
  std::vector<float*> packed;
  const size_t packed_bytes = cblas_sgemm_pack_get_size(CblasBMatrix, m, n, k);
  for (auto& copy : b) {
    packed.push_back(static_cast<float*>(mkl_malloc(packed_bytes, 64)));
    cblas_sgemm_pack(CblasRowMajor, CblasBMatrix, CblasTrans, m, n, k, 1.0f, copy.data(), k, packed.back());
  }
  const double onednn = BestSeconds(copies, [&](int i) {
    matmul.execute(stream, {{DNNL_ARG_SRC, a_memory}, {DNNL_ARG_WEIGHTS, b_memory[i]}, {DNNL_ARG_DST, c_memory}});
    stream.wait();
  });
  const double mkl = BestSeconds(copies, [&](int i) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data(), k, b[i].data(), k, 0.0f, c.data(), n);
  });
  const double mkl_packed = BestSeconds(copies, [&](int i) {
    cblas_sgemm_compute(CblasRowMajor, CblasNoTrans, CblasPacked, m, n, k, a.data(), k, packed[i], k, 0.0f, c.data(),
                        n);
  });
  for (float* p : packed) mkl_free(p);
  const double gflop = 2.0 * m * k * n / 1e9;
  std::printf("| %dx%dx%d | %s | %s | %.3f (%.0f) | %.3f (%.0f) | %.3f (%.0f) |\n", m, k, n, shape.where,
              copies == 1 ? "warm" : "cold", onednn * 1e3, gflop / onednn, mkl * 1e3, gflop / mkl, mkl_packed * 1e3,
              gflop / mkl_packed);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  omp_set_num_threads(threads);
  mkl_set_num_threads(threads);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const Shape shapes[] = {
      {128, 768, 768, "BERT/GPT-2/ViT qkv, out"},  {128, 768, 3072, "BERT/GPT-2 fc1"},
      {128, 3072, 768, "BERT/GPT-2 fc2"},          {256, 1024, 1024, "LLaMA-style q, o"},
      {256, 1024, 2816, "LLaMA-style gate, up"},   {256, 2816, 1024, "LLaMA-style down"},
      {394, 768, 3072, "ViT-B/16 fc1 (2 images)"}, {1500, 512, 2048, "Whisper-style fc1"},
  };
  std::printf("%d threads; ms (GF/s), best of 6 blocks\n\n", threads);
  std::printf("| M x K x N | in the corpus | B | oneDNN 2.6 matmul | MKL sgemm | MKL packed sgemm |\n");
  std::printf("|---|---|---|---:|---:|---:|\n");
  for (const Shape& shape : shapes) {
    Compare(shape, 1, engine, stream);
    Compare(shape, 8, engine, stream);
  }
  return 0;
}
