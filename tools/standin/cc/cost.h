// How long a compile takes and how much memory it holds, and spending both,
// so benchmarks of the parallel compile see realistic time and RSS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "settings.h"

namespace standin::cc {

struct CostPlan {
  std::uint64_t cost_ms = 0;
  std::uint64_t memory_bytes = 0;
};

// cost_ms = base + bytes * 1000 / rate, memory = min(cap, bytes * factor),
// each replaced by a "// standin-cost-ms: N" or "// standin-peak-bytes: N"
// line in the graph text when present.
CostPlan plan_cost(const Settings& settings, const std::string& graph);

// Spends `ms` milliseconds: asleep, or burning this process's CPU time in
// busy mode so that concurrent compiles are bounded by the number of cores.
void spend(CostMode mode, std::uint64_t ms);

// Anonymous memory with every page written, so it counts in the resident
// set (and in the peak RSS a parent reads through wait4) until destroyed.
class MemoryHold {
 public:
  explicit MemoryHold(std::uint64_t bytes);
  ~MemoryHold();
  MemoryHold(const MemoryHold&) = delete;
  MemoryHold& operator=(const MemoryHold&) = delete;

 private:
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace standin::cc
