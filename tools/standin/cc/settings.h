// The stand-in compiler's behaviour knobs, all read from STANDIN_CC_*
// environment variables so a test or benchmark can set them for every
// compiler process the product under test starts, without touching its flags.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace standin::cc {

inline constexpr char kDefaultVersion[] = "2.14.213.0+standin";
inline constexpr std::uint64_t kDefaultBytesPerSec = 50'000'000;
inline constexpr std::uint64_t kDefaultBaseMs = 5;

enum class CostMode { kSleep, kBusy };

enum class Fault { kNone, kFail, kExit70, kSigkill, kHang, kTruncate, kSegv };

struct Settings {
  std::string version = kDefaultVersion;

  CostMode mode = CostMode::kSleep;
  std::uint64_t bytes_per_sec = kDefaultBytesPerSec;
  std::uint64_t base_ms = kDefaultBaseMs;

  double mem_per_graph_byte = 0;               // 0: touch no memory
  std::optional<std::uint64_t> mem_peak_bytes; // cap on the scaled amount

  // Both set: simulate an OOM killer over a shared budget.
  std::optional<std::uint64_t> memory_budget;
  std::optional<std::string> memory_ledger;

  Fault fault = Fault::kNone;
  std::optional<std::uint64_t> fault_times;  // nullopt: every attempt
  std::optional<std::string> state_dir;
  std::optional<std::string> fault_match;

  std::optional<std::string> invocation_log;
};

// Reads and validates every STANDIN_CC_* variable; throws a usage error
// naming the variable when one is malformed.
Settings load_settings();

// Only the version, so `--version` works even with other settings broken.
std::string load_version();

}  // namespace standin::cc
