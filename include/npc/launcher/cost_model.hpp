#pragma once
// Predicts what a compile will cost (wall time and peak memory) from the
// attempts recorded in this cache: the entry's own last success first, else
// the rates of past compiles of similar size, else the graph's size alone.
// The pool uses it to start the costliest compile first and to keep the
// compiles that run together within memory.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace npc::launcher {

namespace fs = std::filesystem;

struct Prediction {
  double seconds = 0;
  std::uint64_t peak_bytes = 0; // 0: unknown
  bool from_history = false;
};

// With no history at all, graph bytes per second of compile: only the order
// of the predictions matters then (bigger graphs first), and the ETA.
inline constexpr double kFallbackBytesPerSecond = 1e6;

class CostModel {
public:
  struct Sample {
    std::uint64_t graph_bytes = 0;
    double seconds = 0;
    std::uint64_t peak_bytes = 0;
  };

  CostModel() = default;
  explicit CostModel(std::vector<Sample> samples);
  // Reads the successful attempts of every entry under `version_dir`.
  static CostModel from_version_dir(const fs::path& version_dir);

  [[nodiscard]] Prediction predict(const fs::path& entry_dir, std::uint64_t graph_bytes) const;
  [[nodiscard]] Prediction predict_from_size(std::uint64_t graph_bytes) const;
  [[nodiscard]] std::size_t samples() const { return samples_.size(); }

private:
  std::vector<Sample> samples_; // sorted by graph_bytes
};

// seconds = fixed + per byte × bytes, fitted to the compiles this run has
// measured: on a cold cache the only costs that say how this compiler
// scales with graph size (and what a compile costs beyond that: its process
// starts, its hashing). A fit that would make a cost fall with size or go
// below zero is replaced by the median seconds per byte through zero.
struct SizeFit {
  double fixed_seconds = 0;
  double seconds_per_byte = 0;
  // How well the line explains the samples: the root mean square of
  // (measured - fitted) / measured. Two samples always fit exactly, so it
  // says something from three on.
  double relative_error = 0;
  std::size_t samples = 0;
  [[nodiscard]] double at(std::uint64_t graph_bytes) const {
    return fixed_seconds + seconds_per_byte * static_cast<double>(graph_bytes);
  }
};

// Needs two different sizes; nullopt otherwise.
[[nodiscard]] std::optional<SizeFit> fit_sizes(const std::vector<CostModel::Sample>& samples);

} // namespace npc::launcher
