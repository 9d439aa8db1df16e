#include "faults.h"

#include <cstdint>

#include "env.h"
#include "locked_file.h"

namespace standin::cc {
namespace {

constexpr char kAttemptsWhat[] = "attempt counter";
constexpr char kAttemptsSuffix[] = ".attempts";

// Returns this attempt's number (1 for the first) for the graph.
std::uint64_t count_attempt(const std::string& state_dir, const std::string& graph_sha256) {
  LockedFile counter(state_dir + "/" + graph_sha256 + kAttemptsSuffix, kAttemptsWhat);
  std::string text = counter.read_all();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const std::uint64_t previous = text.empty() ? 0 : parse_u64(text, kAttemptsWhat);
  const std::uint64_t attempt = previous + 1;
  counter.replace(std::to_string(attempt) + "\n");
  return attempt;
}

}  // namespace

Fault fault_for_attempt(const Settings& settings, const std::string& graph,
                        const std::string& graph_sha256) {
  if (settings.fault == Fault::kNone) return Fault::kNone;
  if (settings.fault_match && graph.find(*settings.fault_match) == std::string::npos) {
    return Fault::kNone;
  }
  if (!settings.fault_times) return settings.fault;
  const std::uint64_t attempt = count_attempt(*settings.state_dir, graph_sha256);
  return attempt <= *settings.fault_times ? settings.fault : Fault::kNone;
}

}  // namespace standin::cc
