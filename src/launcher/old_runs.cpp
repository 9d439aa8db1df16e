#include <npc/launcher/old_runs.hpp>

#include <algorithm>
#include <cerrno>
#include <map>
#include <optional>
#include <signal.h>

#include <npc/util/fs.hpp>

namespace npc::launcher {

namespace {

// "pid<N>" in one of a run's names; nullopt for anything else.
std::optional<long> pid_of(const std::string& name) {
  static constexpr std::string_view kPrefixes[] = {"trial_run_pid", "cache_path_pid", "compile_logs_pid"};
  for (auto prefix : kPrefixes) {
    if (!name.starts_with(prefix)) continue;
    std::size_t at = prefix.size(), end = at;
    while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
    if (end == at || end - at > 9) return std::nullopt;
    std::string_view rest = std::string_view(name).substr(end);
    if (rest != "_log.txt" && !(prefix == "compile_logs_pid" && rest.empty())) return std::nullopt;
    return std::stol(name.substr(at, end - at));
  }
  return std::nullopt;
}

bool runs_here(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

struct Run {
  std::vector<fs::path> paths;
  fs::file_time_type newest = fs::file_time_type::min();
};

} // namespace

std::vector<fs::path> remove_old_runs(const fs::path& workdir, std::size_t keep) {
  std::map<long, Run> runs;
  std::error_code ec;
  for (fs::directory_iterator it(workdir, ec), end; !ec && it != end; it.increment(ec)) {
    auto pid = pid_of(it->path().filename().string());
    if (!pid) continue;
    Run& run = runs[*pid];
    run.paths.push_back(it->path());
    std::error_code time_ec;
    auto written = fs::last_write_time(it->path(), time_ec);
    if (!time_ec) run.newest = std::max(run.newest, written);
  }
  std::vector<std::pair<fs::file_time_type, long>> by_age;
  for (const auto& [pid, run] : runs) by_age.emplace_back(run.newest, pid);
  std::sort(by_age.begin(), by_age.end(), std::greater<>());
  std::vector<fs::path> removed;
  for (std::size_t i = keep; i < by_age.size(); ++i) {
    long pid = by_age[i].second;
    if (runs_here(pid)) continue;
    for (const auto& path : runs[pid].paths)
      if (util::remove_tree(path).ok()) removed.push_back(path);
  }
  return removed;
}

} // namespace npc::launcher
