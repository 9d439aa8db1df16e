#pragma once
// The Trace Event Format: the JSON that Perfetto (ui.perfetto.dev) and
// chrome://tracing open, as ninjatracing writes ninja's log and Bazel its
// --generate_json_trace_profile. One TraceEvents is one process of such a
// file: its lanes ("threads"), complete events on them, async events (which
// may overlap: each gets a track of its own), and counters.
//
// Times are microseconds since the Unix epoch, so that the files of several
// hosts merged into one (merge_traces) line up as their clocks do.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <npc/util/result.hpp>

namespace npc::util {

namespace fs = std::filesystem;

class TraceEvents {
public:
  explicit TraceEvents(std::int64_t pid) : pid_(pid) {}

  void name_process(const std::string& name);
  // A lane, shown under `name`, ordered by `sort_index` (smallest on top).
  void name_lane(std::int64_t lane, const std::string& name, std::int64_t sort_index);
  // A span of `duration_us` on `lane` ("ph":"X"): spans of one lane nest or
  // follow each other, never overlap.
  void complete(const std::string& name, const std::string& category, std::int64_t lane, std::int64_t start_us,
                std::int64_t duration_us, nlohmann::json args = nlohmann::json::object());
  // A span that may overlap others ("ph":"b" / "e", paired by category and id).
  void async_begin(const std::string& name, const std::string& category, std::uint64_t id, std::int64_t at_us,
                   nlohmann::json args = nlohmann::json::object());
  void async_end(const std::string& name, const std::string& category, std::uint64_t id, std::int64_t at_us);
  // A counter's values from `at_us` on ("ph":"C"): one track per counter.
  void counter(const std::string& name, std::int64_t at_us, nlohmann::json values);

  [[nodiscard]] const std::vector<nlohmann::json>& events() const { return events_; }
  // The whole file: {"traceEvents": [...], "displayTimeUnit": "ms",
  // "otherData": other_data}, one event a line; published atomically.
  [[nodiscard]] Status write(const fs::path& path, const nlohmann::json& other_data) const;

private:
  [[nodiscard]] nlohmann::json base(const char* phase, const std::string& name, std::int64_t at_us) const;

  std::int64_t pid_;
  std::vector<nlohmann::json> events_;
};

// The text of one trace of the events of `inputs`, each input's as one
// process (given the process id of its place in the list, 1 first; its
// async ids made unique with it), what each input's otherData said kept
// under "merged" in the result's. Fails naming the input that cannot be
// read or is no trace.
[[nodiscard]] Result<std::string> merge_traces(const std::vector<fs::path>& inputs);

} // namespace npc::util
