// Every mode of the launcher, its timeline kept for --trace and written at
// its end: also of a run that failed or was interrupted (what ran until then).

#include <npc/launcher/launcher.hpp>

#include <chrono>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/launcher/report.hpp>
#include <npc/launcher/run_trace.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/error.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/output_file.hpp>

namespace npc::launcher {

namespace {

std::int64_t epoch_microseconds() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What the trace file says of the run as a whole, beside its events.
nlohmann::json trace_facts(const Options& options, const RunFacts& facts) {
  nlohmann::json doc = {{"tool", "neuron_parallel_compile"},
                        {"version", NPC_VERSION},
                        {"host", util::this_host()},
                        {"pid", ::getpid()},
                        {"command", mode_name(options.mode)},
                        {"start_time", facts.start_time},
                        {"compiler_version", facts.compiler_version},
                        {"parallel", facts.parallel}};
  if (options.step) doc["slurm_task"] = options.step->label();
  return doc;
}

std::string trace_process_name(const Options& options) {
  std::string name = "neuron_parallel_compile on " + util::this_host() + " (pid " + std::to_string(::getpid()) + ")";
  if (options.step) name += ", " + options.step->label();
  return name;
}

int run_mode(const Options& options, const config::Settings& settings, RunTrace* trace, RunFacts& facts) {
  switch (options.mode) {
  case Mode::collect_and_compile:
  case Mode::collect:
  case Mode::check:
  case Mode::compile: return run_pre_compile(options, settings, trace, facts);
  default: return run_maintenance(options, settings, trace, facts);
  }
}

} // namespace

int run(const Options& options, const config::Settings& settings) {
  RunFacts facts;
  if (!options.trace) return run_mode(options, settings, nullptr, facts);
  // Before the trace exists, and so before anything runs: a destination
  // that cannot take it (a missing folder, a folder) is this one error,
  // never a compile of hours that ends in a write failure.
  if (auto s = util::check_output_writable(*options.trace); !s)
    throw EnvironmentError("--trace: " + s.error() + " (name a file in a writable directory)");
  RunTrace trace(trace_process_name(options), util::monotonic_seconds(), epoch_microseconds());
  auto write_trace = [&] { return trace.write(*options.trace, trace_facts(options, facts)); };
  int status = 0;
  try {
    status = run_mode(options, settings, &trace, facts);
  } catch (...) {
    // The run's own error is the one the exit says; a trace lost besides
    // is a second fault, said on its own line.
    if (auto s = write_trace(); !s) spdlog::error("--trace: {}", s.error());
    throw;
  }
  if (auto s = write_trace(); !s) {
    // A write that fails at the end (a full disk, /dev/full) is the
    // environment's fault, as for --report; an interrupted run keeps the
    // status of its signal, which the shell acts on.
    if (facts.interrupted_by == 0) throw EnvironmentError("--trace: " + s.error());
    spdlog::error("--trace: {}", s.error());
    return status;
  }
  spdlog::info("trace written to {} (open it in https://ui.perfetto.dev or chrome://tracing)",
               options.trace->string());
  return status;
}

} // namespace npc::launcher
