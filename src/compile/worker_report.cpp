#include <npc/compile/worker_report.hpp>

#include <cerrno>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <npc/util/fs.hpp>
#include <npc/util/json_text.hpp>
#include <npc/util/output_file.hpp>

namespace npc::compile {

using nlohmann::json;

WorkerReport make_worker_report(const EntryCompileResult& result) {
  WorkerReport report;
  report.outcome = result.outcome;
  // A graph another launcher of the run failed for good: who failed it, and how.
  if (result.outcome == EntryOutcome::failed_in_run) report.exit = result.attempt.exit;
  if (result.run) {
    report.exit = result.attempt.exit;
    report.wall_seconds = result.attempt.wall_seconds;
    report.peak_rss_bytes = result.attempt.peak_rss_bytes;
  }
  report.log_path = result.log_path;
  return report;
}

Status write_worker_report(const fs::path& path, const WorkerReport& report) {
  json doc = {{"outcome", report.outcome ? std::string(to_string(*report.outcome)) : std::string()},
              {"error", report.error},
              {"exit", report.exit},
              {"wall_seconds", report.wall_seconds},
              {"peak_rss_bytes", report.peak_rss_bytes},
              {"log", report.log_path.string()}};
  return util::write_output_file(path, util::to_json_text(doc) + "\n");
}

Result<std::optional<WorkerReport>> read_worker_report(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return std::optional<WorkerReport>{};
  auto text = util::read_file(path);
  if (!text) return fail(text.error());
  auto parsed = util::parse_json_text(*text);
  if (!parsed || !parsed->is_object()) return fail(path.string() + " is not a JSON object");
  const json& doc = *parsed;
  WorkerReport report;
  try {
    std::string outcome = doc.value("outcome", "");
    if (!outcome.empty()) {
      report.outcome = parse_entry_outcome(outcome);
      if (!report.outcome) return fail(path.string() + ": unknown outcome '" + outcome + "'");
    }
    report.error = doc.value("error", "");
    report.exit = doc.value("exit", "");
    report.wall_seconds = doc.value("wall_seconds", 0.0);
    report.peak_rss_bytes = doc.value("peak_rss_bytes", std::uint64_t{0});
    report.log_path = doc.value("log", "");
  } catch (const json::exception& e) {
    return fail(path.string() + ": " + e.what());
  }
  return std::optional<WorkerReport>(std::move(report));
}

} // namespace npc::compile
