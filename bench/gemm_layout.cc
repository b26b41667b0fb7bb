// oneDNN's matmul with a constant B stored row-major ("ab") against the same B stored
// column-major ("ba"), timed in one run for the transformer GEMM shapes: why the CPU runtime keeps
// constant weights column-major (docs/benchmarks.md, issue 3), and how efficiency changes with N
// when Q/K/V merge into one GEMM (issue 5).
//
//   build/fusionopt_bench_gemm_layout [THREADS]
#include <dnnl.hpp>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using dnnl::memory;

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// GF/s of C[M,N] = A[M,K] · B[K,N] with B in `layout`, best of 5 blocks of 10 runs.
double GigaflopsPerSecond(int64_t m, int64_t k, int64_t n, memory::format_tag layout, dnnl::engine& engine,
                          dnnl::stream& stream) {
  memory::desc a_desc({m, k}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc b_desc({k, n}, memory::data_type::f32, layout);
  memory::desc c_desc({m, n}, memory::data_type::f32, memory::format_tag::ab);
  dnnl::matmul::primitive_desc descriptor(dnnl::matmul::desc(a_desc, b_desc, c_desc), engine);
  dnnl::matmul primitive(descriptor);
  std::vector<float> a(static_cast<size_t>(m * k), 0.5f), b(static_cast<size_t>(k * n), 0.25f), c(static_cast<size_t>(m * n));
  memory a_memory(a_desc, engine, a.data()), b_memory(b_desc, engine, b.data()), c_memory(c_desc, engine, c.data());
  auto run = [&] {
    primitive.execute(stream, {{DNNL_ARG_SRC, a_memory}, {DNNL_ARG_WEIGHTS, b_memory}, {DNNL_ARG_DST, c_memory}});
  };
  for (int i = 0; i < 3; ++i) run();
  stream.wait();
  double best = 1e30;
  for (int block = 0; block < 5; ++block) {
    const double start = Seconds();
    for (int i = 0; i < 10; ++i) run();
    stream.wait();
    best = std::min(best, (Seconds() - start) / 10);
  }
  return 2.0 * static_cast<double>(m * k * n) / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  omp_set_num_threads(threads);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const int64_t shapes[][3] = {{128, 768, 768}, {128, 768, 2304}, {128, 768, 3072}, {128, 3072, 768}};
  std::printf("threads=%d (GF/s, best of 5 x 10 runs)\n", threads);
  std::printf("| M x K x N | B row-major (ab) | B column-major (ba) | ba / ab |\n|---|---:|---:|---:|\n");
  for (const auto& shape : shapes) {
    const double row = GigaflopsPerSecond(shape[0], shape[1], shape[2], memory::format_tag::ab, engine, stream);
    const double column = GigaflopsPerSecond(shape[0], shape[1], shape[2], memory::format_tag::ba, engine, stream);
    std::printf("| %lld x %lld x %lld | %.1f | %.1f | %.2f |\n", static_cast<long long>(shape[0]),
                static_cast<long long>(shape[1]), static_cast<long long>(shape[2]), row, column, column / row);
  }
  return 0;
}
