#pragma once
// The run as a timeline (--trace FILE, NEURON_PARALLEL_COMPILE_TRACE): the
// launcher's phases on one lane (the trial, collecting the graphs, the
// compile phase); each compile attempt as a span named by its entry
// (MODULE_...) on the lane of the worker slot it ran in, with its outcome,
// attempt and retry number, exit and peak memory; each wait for a graph
// another process or host holds as a span of its own; the memory admitted
// against the budget, and the compiles running, as counters. Written in the
// Trace Event Format (util/trace_events.hpp) at the end of the run, also of
// one that failed or was interrupted.
//
// The pool's times are seconds on the monotonic clock; the file's are
// microseconds since the epoch (one reading of both clocks at the start), so
// the traces of a cluster's hosts merge onto one time axis.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/launcher/pool.hpp>
#include <npc/util/result.hpp>
#include <npc/util/trace_events.hpp>

namespace npc::launcher {

namespace fs = std::filesystem;

class RunTrace {
public:
  // `monotonic_now` and `epoch_us_now` are one moment on both clocks.
  RunTrace(std::string process_name, double monotonic_now, std::int64_t epoch_us_now);

  // A phase of the launcher, on its own lane: "trial", "collect", "compile".
  void phase(const std::string& name, double started, double ended, nlohmann::json args = nlohmann::json::object());

  // An attempt of item `i` started: it takes the lowest free worker slot.
  void attempt_started(std::size_t i, double now);
  // It ended: its span, on the slot it held, which is free again.
  void attempt_ended(const Pool& pool, std::size_t i, AttemptEnd end, const AttemptInfo& info, double now);
  // The memory admitted and the compiles running, now.
  void load(const Pool& pool, double now);
  // Waits: a graph deferred (held by another process or host) begins one, a
  // graph no longer deferred ends it. Called after the pool's states change.
  void waits(const Pool& pool, double now);
  // Ends what is still open (waits, attempts of an interrupted run).
  void close(const Pool& pool, double now);

  [[nodiscard]] Status write(const fs::path& path, const nlohmann::json& other_data) const;
  [[nodiscard]] const util::TraceEvents& events() const { return events_; }

private:
  [[nodiscard]] std::int64_t epoch_us(double monotonic) const;
  std::size_t take_slot();
  void end_span(const Pool& pool, std::size_t i, std::string_view outcome, const AttemptInfo& info, double now);

  util::TraceEvents events_;
  double monotonic_zero_;
  std::int64_t epoch_us_zero_;
  std::vector<bool> slot_busy_;
  std::map<std::size_t, std::pair<std::size_t, double>> running_; // item -> (slot, started)
  std::map<std::size_t, double> waiting_;                          // item -> since
  std::optional<std::pair<std::uint64_t, int>> last_load_;
};

// Where a launcher writes its trace: `path`, or, when it is one of several
// tasks of a Slurm step (which all get the same --trace), `path` with the
// task's tag before its extension ("trace.json" -> "trace.node-a.task2.json"),
// so that the tasks do not overwrite each other's on a shared file system.
[[nodiscard]] fs::path trace_path_for_task(const fs::path& path, const std::string& task_tag);

} // namespace npc::launcher
