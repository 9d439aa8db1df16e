#include <npc/launcher/cost_model.hpp>

#include <algorithm>
#include <cmath>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/key.hpp>

namespace npc::launcher {

namespace {
// Samples within this size ratio of a graph count as "similar size".
constexpr double kSimilarSizeRatio = 2.0;
} // namespace

CostModel::CostModel(std::vector<Sample> samples) : samples_(std::move(samples)) {
  std::sort(samples_.begin(), samples_.end(),
            [](const Sample& a, const Sample& b) { return a.graph_bytes < b.graph_bytes; });
}

CostModel CostModel::from_version_dir(const fs::path& version_dir) {
  std::vector<Sample> samples;
  std::error_code ec;
  for (fs::directory_iterator it(version_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string g, f;
    if (!cache::parse_module_name(it->path().filename().string(), g, f)) continue;
    auto meta = cache::read_entry_meta(it->path());
    if (!meta) continue;
    if (const auto* ok = meta->last_success(); ok && meta->graph_bytes > 0)
      samples.push_back({meta->graph_bytes, ok->wall_seconds, ok->peak_rss_bytes});
  }
  return CostModel(std::move(samples));
}

Prediction CostModel::predict_from_size(std::uint64_t graph_bytes) const {
  Prediction p;
  double size = static_cast<double>(std::max<std::uint64_t>(graph_bytes, 1));
  if (samples_.empty()) {
    p.seconds = size / kFallbackBytesPerSecond;
    return p;
  }
  // Similar sizes if there are any, else all: median seconds per byte, and
  // the largest peak per byte (memory is where underestimating hurts).
  std::vector<const Sample*> similar;
  for (const auto& s : samples_) {
    double ratio = static_cast<double>(std::max<std::uint64_t>(s.graph_bytes, 1)) / size;
    if (ratio <= kSimilarSizeRatio && ratio >= 1.0 / kSimilarSizeRatio) similar.push_back(&s);
  }
  if (similar.empty())
    for (const auto& s : samples_) similar.push_back(&s);
  std::vector<double> rates;
  double peak_rate = 0;
  for (const Sample* s : similar) {
    double bytes = static_cast<double>(std::max<std::uint64_t>(s->graph_bytes, 1));
    rates.push_back(s->seconds / bytes);
    peak_rate = std::max(peak_rate, static_cast<double>(s->peak_bytes) / bytes);
  }
  std::nth_element(rates.begin(), rates.begin() + static_cast<long>(rates.size() / 2), rates.end());
  p.seconds = rates[rates.size() / 2] * size;
  p.peak_bytes = static_cast<std::uint64_t>(peak_rate * size);
  p.from_history = true;
  return p;
}

Prediction CostModel::predict(const fs::path& entry_dir, std::uint64_t graph_bytes) const {
  auto meta = cache::read_entry_meta(entry_dir);
  if (meta) {
    if (const auto* ok = meta->last_success()) return {ok->wall_seconds, ok->peak_rss_bytes, true};
    // A compile killed or failed still tells how much memory it had reached.
    std::uint64_t peak = 0;
    for (const auto& a : meta->attempts) peak = std::max(peak, a.peak_rss_bytes);
    Prediction p = predict_from_size(graph_bytes);
    p.peak_bytes = std::max(p.peak_bytes, peak);
    return p;
  }
  return predict_from_size(graph_bytes);
}

std::optional<SizeFit> fit_sizes(const std::vector<CostModel::Sample>& samples) {
  if (samples.size() < 2) return std::nullopt;
  double n = static_cast<double>(samples.size());
  double mean_x = 0, mean_y = 0;
  for (const auto& s : samples) {
    mean_x += static_cast<double>(s.graph_bytes) / n;
    mean_y += s.seconds / n;
  }
  double sxx = 0, sxy = 0;
  for (const auto& s : samples) {
    double dx = static_cast<double>(s.graph_bytes) - mean_x;
    sxx += dx * dx;
    sxy += dx * (s.seconds - mean_y);
  }
  if (sxx <= 0) return std::nullopt; // one size only: no slope to fit
  SizeFit fit{mean_y - sxy / sxx * mean_x, sxy / sxx};
  if (fit.seconds_per_byte <= 0 || fit.fixed_seconds < 0) {
    std::vector<double> rates;
    for (const auto& s : samples)
      if (s.graph_bytes > 0) rates.push_back(s.seconds / static_cast<double>(s.graph_bytes));
    if (rates.empty()) return std::nullopt;
    std::nth_element(rates.begin(), rates.begin() + static_cast<long>(rates.size() / 2), rates.end());
    fit = SizeFit{0, rates[rates.size() / 2]};
  }
  double squares = 0;
  for (const auto& s : samples) {
    double off = s.seconds > 0 ? (s.seconds - fit.at(s.graph_bytes)) / s.seconds : 1.0;
    squares += off * off;
  }
  fit.relative_error = std::sqrt(squares / n);
  fit.samples = samples.size();
  return fit;
}

} // namespace npc::launcher
