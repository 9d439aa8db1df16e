#include "settings.h"

#include "env.h"
#include "error.h"

namespace standin::cc {
namespace {

CostMode parse_mode() {
  const std::string mode = env_string("STANDIN_CC_MODE").value_or("sleep");
  if (mode == "sleep") return CostMode::kSleep;
  if (mode == "busy") return CostMode::kBusy;
  throw usage_error("STANDIN_CC_MODE must be 'sleep' or 'busy', got '" + mode + "'");
}

Fault parse_fault() {
  const std::optional<std::string> fault = env_string("STANDIN_CC_FAULT");
  if (!fault) return Fault::kNone;
  if (*fault == "fail") return Fault::kFail;
  if (*fault == "exit70") return Fault::kExit70;
  if (*fault == "sigkill") return Fault::kSigkill;
  if (*fault == "hang") return Fault::kHang;
  if (*fault == "truncate") return Fault::kTruncate;
  if (*fault == "segv") return Fault::kSegv;
  throw usage_error("STANDIN_CC_FAULT must be one of fail, exit70, sigkill, hang, truncate, segv; got '" +
                    *fault + "'");
}

std::optional<std::uint64_t> parse_fault_times() {
  const std::optional<std::string> times = env_string("STANDIN_CC_FAULT_TIMES");
  if (!times || *times == "always") return std::nullopt;
  return parse_u64(*times, "STANDIN_CC_FAULT_TIMES");
}

}  // namespace

std::string load_version() { return env_string("STANDIN_CC_VERSION").value_or(kDefaultVersion); }

Settings load_settings() {
  Settings settings;
  settings.version = load_version();
  settings.mode = parse_mode();
  settings.bytes_per_sec = env_u64("STANDIN_CC_BYTES_PER_SEC", kDefaultBytesPerSec);
  if (settings.bytes_per_sec == 0) throw usage_error("STANDIN_CC_BYTES_PER_SEC must be positive");
  settings.base_ms = env_u64("STANDIN_CC_BASE_MS", kDefaultBaseMs);
  settings.mem_per_graph_byte = env_double("STANDIN_CC_MEM_PER_GRAPH_BYTE", 0);
  settings.mem_peak_bytes = env_bytes("STANDIN_CC_MEM_PEAK_BYTES");

  settings.memory_budget = env_bytes("STANDIN_CC_MEMORY_BUDGET");
  settings.memory_ledger = env_string("STANDIN_CC_MEMORY_LEDGER");
  if (settings.memory_budget.has_value() != settings.memory_ledger.has_value()) {
    throw usage_error("STANDIN_CC_MEMORY_BUDGET and STANDIN_CC_MEMORY_LEDGER must be set together");
  }

  settings.fault = parse_fault();
  settings.fault_times = parse_fault_times();
  settings.state_dir = env_string("STANDIN_CC_STATE_DIR");
  if (settings.fault != Fault::kNone && settings.fault_times && !settings.state_dir) {
    throw usage_error("STANDIN_CC_FAULT_TIMES=<number> needs STANDIN_CC_STATE_DIR to count attempts");
  }
  settings.fault_match = env_string("STANDIN_CC_FAULT_MATCH");

  settings.invocation_log = env_string("STANDIN_CC_INVOCATION_LOG");
  return settings;
}

}  // namespace standin::cc
