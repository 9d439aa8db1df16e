// What export and import report: the exit status of an import, and both
// reports as neuron_cache --json prints them.

#include <npc/bundle/bundle.hpp>

#include <nlohmann/json.hpp>

namespace npc::bundle {

using nlohmann::json;

int ImportReport::exit_code() const {
  if (error) return static_cast<int>(error_code);
  return rejected.empty() ? 0 : 1;
}

namespace {
json key_reasons(const std::vector<KeyReason>& list) {
  json out = json::array();
  for (const auto& r : list) out.push_back({{"key", r.key}, {"reason", r.reason}});
  return out;
}
} // namespace

json to_json(const ExportReport& report) {
  return {{"output", report.output.string()},
          {"entries", report.exported.size()},
          {"failed_entries", report.failed_exported},
          {"unverified", report.unverified},
          {"bytes", report.bytes},
          {"bundle_bytes", report.bundle_bytes},
          {"exported", report.exported},
          {"skipped", key_reasons(report.skipped)},
          {"left_out", key_reasons(report.left_out)}};
}

json to_json(const ImportReport& report) {
  return {{"imported", report.imported.size()},
          {"skipped", report.skipped.size()},
          {"rejected", key_reasons(report.rejected)},
          {"imported_keys", report.imported},
          {"skipped_entries", key_reasons(report.skipped)},
          {"bundle", {{"tool_version", report.tool_version}, {"created", report.created}}},
          {"error", report.error ? json(*report.error) : json(nullptr)}};
}

} // namespace npc::bundle
