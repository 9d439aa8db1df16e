#include "cost.h"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <optional>

#include "env.h"
#include "error.h"
#include "files.h"

namespace standin::cc {
namespace {

inline constexpr std::uint64_t kMsPerSec = 1000;
inline constexpr long kNsPerMs = 1'000'000;
inline constexpr char kCostMarker[] = "// standin-cost-ms:";
inline constexpr char kPeakMarker[] = "// standin-peak-bytes:";

// The number after `marker` anywhere in the graph text, if the marker is there.
std::optional<std::uint64_t> graph_override(const std::string& graph, const std::string& marker) {
  const std::size_t at = graph.find(marker);
  if (at == std::string::npos) return std::nullopt;
  std::size_t begin = at + marker.size();
  while (begin < graph.size() && (graph[begin] == ' ' || graph[begin] == '\t')) ++begin;
  std::size_t end = begin;
  while (end < graph.size() && std::isdigit(static_cast<unsigned char>(graph[end]))) ++end;
  return parse_u64(graph.substr(begin, end - begin), "graph line '" + marker + "'");
}

std::uint64_t scaled_memory(const Settings& settings, std::uint64_t graph_bytes) {
  const double scaled = std::floor(static_cast<double>(graph_bytes) * settings.mem_per_graph_byte);
  const std::uint64_t bytes = static_cast<std::uint64_t>(scaled);
  return settings.mem_peak_bytes ? std::min(bytes, *settings.mem_peak_bytes) : bytes;
}

timespec to_timespec(std::uint64_t ms) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ms / kMsPerSec);
  ts.tv_nsec = static_cast<long>(ms % kMsPerSec) * kNsPerMs;
  return ts;
}

std::uint64_t clock_ms(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * kMsPerSec +
         static_cast<std::uint64_t>(now.tv_nsec / kNsPerMs);
}

void sleep_ms(std::uint64_t ms) {
  timespec remaining = to_timespec(ms);
  while (nanosleep(&remaining, &remaining) != 0 && errno == EINTR) {
  }
}

void burn_cpu_ms(std::uint64_t ms) {
  // Process CPU time, not wall time: two busy compiles sharing one core
  // each take twice as long, which is the point of busy mode.
  const std::uint64_t deadline = clock_ms(CLOCK_PROCESS_CPUTIME_ID) + ms;
  static constexpr int kSpinsPerClockRead = 100'000;
  volatile std::uint64_t sink = 0;
  while (clock_ms(CLOCK_PROCESS_CPUTIME_ID) < deadline) {
    for (int i = 0; i < kSpinsPerClockRead; ++i) sink = sink * 6364136223846793005ULL + 1;
  }
}

}  // namespace

CostPlan plan_cost(const Settings& settings, const std::string& graph) {
  CostPlan plan;
  const std::uint64_t bytes = graph.size();
  plan.cost_ms = graph_override(graph, kCostMarker)
                     .value_or(settings.base_ms + bytes * kMsPerSec / settings.bytes_per_sec);
  plan.memory_bytes = graph_override(graph, kPeakMarker).value_or(scaled_memory(settings, bytes));
  return plan;
}

void spend(CostMode mode, std::uint64_t ms) {
  if (ms == 0) return;
  if (mode == CostMode::kBusy) {
    burn_cpu_ms(ms);
  } else {
    sleep_ms(ms);
  }
}

MemoryHold::MemoryHold(std::uint64_t bytes) : bytes_(static_cast<std::size_t>(bytes)) {
  if (bytes_ == 0) return;
  base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    throw failure("cannot allocate " + std::to_string(bytes) + " bytes of compiler memory: " +
                  errno_text());
  }
  // Writing one byte per page is enough to make the kernel back every page.
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  auto* bytes_ptr = static_cast<volatile unsigned char*>(base_);
  for (std::size_t offset = 0; offset < bytes_; offset += page) bytes_ptr[offset] = 1;
}

MemoryHold::~MemoryHold() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

}  // namespace standin::cc
