// The same primitives timed under whichever oneDNN this file is compiled against: Debian's 2.6
// (what the runtime links) or a 3.x from PyPI (`onednn-devel-cpu-gomp`, the only 3.x wheel
// built for GNU OpenMP rather than SYCL/TBB). Issue 15, item 2: the library chosen by
// measurement. Each GEMM shape of the corpus runs with constant B in three layouts (oneDNN's
// pick for `any`, row-major, column-major), warm (one B) and cold (eight Bs in turn, as a
// model's layers stream their weights); convolutions run on nChw8c activations, weights in the
// layout the primitive picks. Prints the implementation oneDNN chose beside each time.
//
//   make -C build fusionopt_bench_onednn_versions          # against Debian's oneDNN
//   python3 -m venv /tmp/dnnl3 && /tmp/dnnl3/bin/pip install onednn-devel-cpu-gomp==2023.2.0
//   cmake -S . -B build -DFUSIONOPT_ONEDNN3_ROOT=/tmp/dnnl3 && make -C build fusionopt_bench_onednn3_versions
//   OMP_NUM_THREADS=2 build/fusionopt_bench_onednn_versions; OMP_NUM_THREADS=2 build/fusionopt_bench_onednn3_versions
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <unordered_map>
#include <vector>

namespace {

// Its own engine and stream rather than the runtime's (cpu_runtime/onednn): this file is also
// built against a second oneDNN, which the runtime's library cannot link with.
using dnnl::memory;
using Tag = memory::format_tag;
using Arguments = std::unordered_map<int, memory>;

const dnnl::engine& Engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& Stream() {
  static dnnl::stream stream(Engine());
  return stream;
}

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void Fill(memory& buffer) {
  float* data = static_cast<float*>(buffer.get_data_handle());
  const size_t count = buffer.get_desc().get_size() / sizeof(float);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(static_cast<int>(i * 37 % 101) - 50) / 100.0f;
}

// Median seconds of `runs` executions, cycling through `argument_sets`.
double MedianSeconds(dnnl::primitive& primitive, const std::vector<Arguments>& argument_sets, int runs) {
  for (int i = 0; i < 3; ++i) primitive.execute(Stream(), argument_sets[i % argument_sets.size()]);
  Stream().wait();
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    const double start = Now();
    primitive.execute(Stream(), argument_sets[i % argument_sets.size()]);
    Stream().wait();
    seconds.push_back(Now() - start);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

const char* TagName(Tag tag) { return tag == Tag::any ? "any" : tag == Tag::ab ? "row-major" : "column-major"; }

void TimeGemm(int m, int k, int n, Tag b_tag, int weight_copies) {
  const memory::desc a({m, k}, memory::data_type::f32, Tag::ab), c({m, n}, memory::data_type::f32, Tag::ab);
  const memory::desc b({k, n}, memory::data_type::f32, b_tag), b_source({k, n}, memory::data_type::f32, Tag::ab);
#if DNNL_VERSION_MAJOR >= 3
  const dnnl::matmul::primitive_desc chosen(Engine(), a, b, c);
#else
  const dnnl::matmul::primitive_desc chosen(dnnl::matmul::desc(a, b, c), Engine());
#endif
  memory a_memory(a, Engine()), c_memory(c, Engine());
  Fill(a_memory);
  std::vector<Arguments> argument_sets;
  for (int copy = 0; copy < weight_copies; ++copy) {
    memory source(b_source, Engine()), weights(chosen.weights_desc(), Engine());
    Fill(source);
    dnnl::reorder(source, weights).execute(Stream(), source, weights);
    argument_sets.push_back({{DNNL_ARG_SRC, a_memory}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, c_memory}});
  }
  Stream().wait();
  dnnl::matmul primitive(chosen);
  const double seconds = MedianSeconds(primitive, argument_sets, 30);
  std::printf("gemm %dx%dx%d B %-12s %s %-14s %8.3f ms %5.0f GF/s\n", m, k, n, TagName(b_tag),
              weight_copies > 1 ? "cold" : "warm", chosen.impl_info_str(), seconds * 1e3, 2.0 * m * k * n / seconds / 1e9);
}

void TimeConvolution(const char* name, int channels, int out_channels, int size, int kernel, int stride, int groups) {
  const int pad = kernel / 2, out_size = (size + 2 * pad - kernel) / stride + 1;
  const memory::desc src({1, channels, size, size}, memory::data_type::f32, Tag::nChw8c);
  const memory::desc dst({1, out_channels, out_size, out_size}, memory::data_type::f32, Tag::any);
  const memory::dims weight_dims = groups > 1 ? memory::dims{groups, out_channels / groups, channels / groups, kernel, kernel}
                                              : memory::dims{out_channels, channels, kernel, kernel};
  const memory::desc weights(weight_dims, memory::data_type::f32, Tag::any), bias({out_channels}, memory::data_type::f32, Tag::x);
  const auto kind = dnnl::prop_kind::forward_inference;
  const auto algorithm = dnnl::algorithm::convolution_direct;
#if DNNL_VERSION_MAJOR >= 3
  const dnnl::convolution_forward::primitive_desc chosen(Engine(), kind, algorithm, src, weights, bias, dst,
                                                         {stride, stride}, {pad, pad}, {pad, pad});
#else
  const dnnl::convolution_forward::primitive_desc chosen(
      dnnl::convolution_forward::desc(kind, algorithm, src, weights, bias, dst, {stride, stride}, {pad, pad}, {pad, pad}),
      Engine());
#endif
  memory src_memory(src, Engine()), weight_memory(chosen.weights_desc(), Engine()), bias_memory(bias, Engine()),
      dst_memory(chosen.dst_desc(), Engine());
  Fill(src_memory);
  Fill(weight_memory);
  Fill(bias_memory);
  const std::vector<Arguments> arguments{{{DNNL_ARG_SRC, src_memory},
                                          {DNNL_ARG_WEIGHTS, weight_memory},
                                          {DNNL_ARG_BIAS, bias_memory},
                                          {DNNL_ARG_DST, dst_memory}}};
  dnnl::convolution_forward primitive(chosen);
  const double seconds = MedianSeconds(primitive, arguments, 50);
  const double flops = 2.0 * out_channels * out_size * out_size * (channels / groups) * kernel * kernel;
  std::printf("conv %-22s %-14s %8.3f ms %5.0f GF/s\n", name, chosen.impl_info_str(), seconds * 1e3, flops / seconds / 1e9);
}

}  // namespace

int main() {
  std::printf("oneDNN %d.%d.%d\n", dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch);
  const int shapes[][3] = {{128, 768, 768},   {128, 768, 3072},  {128, 3072, 768},
                           {256, 1024, 2816}, {256, 2816, 1024}, {197, 768, 3072}};
  for (const auto& shape : shapes) {
    for (Tag tag : {Tag::any, Tag::ab, Tag::ba}) {
      for (int copies : {1, 8}) TimeGemm(shape[0], shape[1], shape[2], tag, copies);
    }
  }
  TimeConvolution("1x1 256->64 56x56", 256, 64, 56, 1, 1, 1);
  TimeConvolution("1x1 1024->256 14x14", 1024, 256, 14, 1, 1, 1);
  TimeConvolution("1x1 96->24 56x56", 96, 24, 56, 1, 1, 1);
  TimeConvolution("3x3 64 56x56", 64, 64, 56, 3, 1, 1);
  TimeConvolution("dw3x3 144 56x56", 144, 144, 56, 3, 1, 144);
  TimeConvolution("dw5x5/2 240 28x28", 240, 240, 28, 5, 2, 240);
  return 0;
}
