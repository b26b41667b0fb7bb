// `fusionopt bench --roofline FILE.svg`: every kernel of both versions placed on the roofline
// of the machine the timings come from. x is arithmetic intensity (the cost model's FLOPs over
// the bytes the kernel moves through memory), y the attained FLOP/s (those FLOPs over the
// kernel's measured time). Fusion removes intermediate bytes, so a fused kernel sits to the
// right of its members and, when it pays, higher. The plot is plain SVG written here: one
// scatter chart does not justify a plotting dependency in a C++ tool.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "cli/bench/bench.h"

namespace fusionopt::cli {
namespace {

constexpr double kWidth = 860, kHeight = 560;
constexpr double kLeft = 90, kRight = 230, kTop = 60, kBottom = 70;  // plot margins; legend on the right

std::string Escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Log-scaled axes spanning whole decades around everything drawn.
struct LogAxes {
  double x_lo, x_hi, y_lo, y_hi;  // decade exponents

  double X(double intensity) const {
    return kLeft + (std::log10(intensity) - x_lo) / (x_hi - x_lo) * (kWidth - kLeft - kRight);
  }
  double Y(double flops) const {
    return kHeight - kBottom - (std::log10(flops) - y_lo) / (y_hi - y_lo) * (kHeight - kTop - kBottom);
  }
};

LogAxes AxesFor(const passes::TargetProfile& profile, const std::vector<RooflineSeries>& series) {
  double x_min = profile.ridge_intensity(), x_max = profile.ridge_intensity();
  double y_min = profile.peak_flops, y_max = profile.peak_flops;
  for (const RooflineSeries& one : series) {
    for (const RooflinePoint& point : one.points) {
      x_min = std::min(x_min, point.intensity);
      x_max = std::max(x_max, point.intensity);
      y_min = std::min(y_min, point.attained_flops);
      y_max = std::max(y_max, point.attained_flops);
    }
  }
  return {std::floor(std::log10(x_min)), std::ceil(std::log10(x_max)) + (x_max == x_min ? 1 : 0),
          std::floor(std::log10(y_min)), std::ceil(std::log10(y_max * 1.5))};
}

std::string Exponent(int decade) { return fmt::format("10<tspan dy=\"-6\" font-size=\"10\">{}</tspan>", decade); }

void DrawAxes(std::string& svg, const LogAxes& axes) {
  const double x0 = kLeft, x1 = kWidth - kRight, y0 = kHeight - kBottom, y1 = kTop;
  for (int d = static_cast<int>(axes.x_lo); d <= static_cast<int>(axes.x_hi); ++d) {
    double x = axes.X(std::pow(10.0, d));
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#e3e3e3\"/>\n", x, y0, y1);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x, y0 + 20, Exponent(d));
  }
  for (int d = static_cast<int>(axes.y_lo); d <= static_cast<int>(axes.y_hi); ++d) {
    double y = axes.Y(std::pow(10.0, d));
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{2:.1f}\" x2=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#e3e3e3\"/>\n", x0, x1, y);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", x0 - 8, y + 4, Exponent(d));
  }
  svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#444\"/>\n",
                     x0, y1, x1 - x0, y0 - y1);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">arithmetic intensity (FLOP / byte)</text>\n",
                     (x0 + x1) / 2, kHeight - 25);
  svg += fmt::format("<text transform=\"translate(25 {:.1f}) rotate(-90)\" text-anchor=\"middle\">attained FLOP/s"
                     "</text>\n", (y0 + y1) / 2);
}

// min(peak, bandwidth × intensity) across the x range: the memory slope, then the flat compute roof.
void DrawRoof(std::string& svg, const LogAxes& axes, const passes::TargetProfile& profile) {
  double lo = std::pow(10.0, axes.x_lo), hi = std::pow(10.0, axes.x_hi);
  double ridge = std::clamp(profile.ridge_intensity(), lo, hi);
  auto roof = [&](double x) { return std::min(profile.peak_flops, profile.bandwidth * x); };
  svg += fmt::format("<polyline class=\"roof\" fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\" "
                     "points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\"/>\n",
                     axes.X(lo), axes.Y(std::max(roof(lo), std::pow(10.0, axes.y_lo))), axes.X(ridge), axes.Y(roof(ridge)),
                     axes.X(hi), axes.Y(roof(hi)));
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#c0392b\" font-size=\"11\">peak {:.3g} GFLOP/s, "
                     "{:.3g} GB/s</text>\n",
                     axes.X(ridge) + 6, axes.Y(profile.peak_flops) - 6, profile.peak_flops / 1e9, profile.bandwidth / 1e9);
}

struct SeriesStyle {
  const char* fill;
  const char* stroke;
};
constexpr SeriesStyle kStyles[] = {{"none", "#7f8c8d"}, {"#2e86de", "#1b4f8a"}};

void DrawSeries(std::string& svg, const LogAxes& axes, const RooflineSeries& series, const SeriesStyle& style) {
  for (const RooflinePoint& point : series.points) {
    svg += fmt::format("<circle class=\"kernel\" data-side=\"{}\" data-op=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" "
                       "fill=\"{}\" stroke=\"{}\" fill-opacity=\"0.75\"><title>{} ({}): {:.3g} FLOP/B, {:.3g} GFLOP/s"
                       "</title></circle>\n",
                       Escape(series.label), Escape(point.op), axes.X(point.intensity), axes.Y(point.attained_flops),
                       style.fill, style.stroke, Escape(point.kernel), Escape(point.op), point.intensity,
                       point.attained_flops / 1e9);
  }
}

void DrawLegend(std::string& svg, const std::vector<RooflineSeries>& series) {
  double x = kWidth - kRight + 20, y = kTop + 10;
  for (size_t i = 0; i < series.size(); ++i, y += 44) {
    const SeriesStyle& style = kStyles[std::min<size_t>(i, 1)];
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\" stroke=\"{}\"/>\n", x, y, style.fill,
                       style.stroke);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{} ({} kernels)</text>\n", x + 12, y + 4,
                       Escape(series[i].label), series[i].points.size());
    if (series[i].unplaced > 0) {
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" fill=\"#666\">{} without FLOPs or time "
                         "not shown</text>\n", x + 12, y + 20, series[i].unplaced);
    }
  }
}

}  // namespace

std::vector<RooflinePoint> RooflinePoints(const Model& model, const passes::TargetProfile& profile,
                                          const passes::SymbolSizes& symbols,
                                          const std::unordered_map<const Node*, cpu::NodeTiming>& node_times, int runs,
                                          int64_t& unplaced) {
  std::vector<RooflinePoint> points;
  unplaced = 0;
  passes::CostModel costs(model, profile, symbols);
  for (const passes::CostedKernel& kernel : costs.CostOfModel().kernels) {
    auto timing = node_times.find(kernel.node);
    double seconds = timing == node_times.end() ? 0 : timing->second.total_ms / 1e3 / std::max(runs, 1);
    if (!kernel.cost.known || kernel.cost.flops <= 0 || kernel.cost.bytes() <= 0 || seconds <= 0) {
      ++unplaced;
      continue;
    }
    const Node& node = *kernel.node;
    points.push_back({node.name(), OpLabel(node),
                      kernel.cost.intensity(), kernel.cost.flops / seconds, seconds});
  }
  return points;
}

std::string RooflineSvg(const std::string& title, const passes::TargetProfile& profile,
                        const std::vector<RooflineSeries>& series) {
  LogAxes axes = AxesFor(profile, series);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"13\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kWidth, kHeight);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"28\" font-size=\"16\" text-anchor=\"middle\">{}</text>\n",
                     (kLeft + kWidth - kRight) / 2, Escape(title));
  svg += fmt::format("<text x=\"{:.1f}\" y=\"46\" font-size=\"11\" fill=\"#666\" text-anchor=\"middle\">roof: {}</text>\n",
                     (kLeft + kWidth - kRight) / 2, Escape(profile.description));
  DrawAxes(svg, axes);
  DrawRoof(svg, axes, profile);
  for (size_t i = 0; i < series.size(); ++i) DrawSeries(svg, axes, series[i], kStyles[std::min<size_t>(i, 1)]);
  DrawLegend(svg, series);
  svg += "</svg>\n";
  return svg;
}

}  // namespace fusionopt::cli
