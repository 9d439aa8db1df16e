#include <npc/launcher/old_runs.hpp>

#include <algorithm>
#include <cerrno>
#include <map>
#include <optional>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>

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
  std::optional<fs::path> log_dir; // compile_logs_pid<N>/
  fs::file_time_type newest = fs::file_time_type::min();
};

enum class Alive { yes, no, unknown };

// Whether a run holds its log folder's flock (mark_run_alive). Unknown when
// it has no log folder or the folder cannot be opened.
Alive holds_its_lock(const Run& run) {
  if (!run.log_dir) return Alive::unknown;
  util::UniqueFd fd(::open(run.log_dir->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return Alive::unknown;
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return Alive::no; // released when fd closes
  return errno == EWOULDBLOCK ? Alive::yes : Alive::unknown;
}

// A run of an older release takes no flock: an unheld folder says nothing
// then, and its pid is asked as before. Ours holds it from its start, so
// an unheld folder of a run that lives is one of those.
bool alive(const Run& run, long pid) {
  switch (holds_its_lock(run)) {
  case Alive::yes: return true;
  case Alive::no:
  case Alive::unknown: return runs_here(pid);
  }
  return true;
}

} // namespace

util::UniqueFd mark_run_alive(const fs::path& log_dir) {
  util::UniqueFd fd(::open(log_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.valid() && ::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) fd.reset();
  return fd;
}

std::vector<fs::path> remove_old_runs(const fs::path& workdir, std::size_t keep) {
  std::map<long, Run> runs;
  std::error_code ec;
  for (fs::directory_iterator it(workdir, ec), end; !ec && it != end; it.increment(ec)) {
    auto pid = pid_of(it->path().filename().string());
    if (!pid) continue;
    Run& run = runs[*pid];
    run.paths.push_back(it->path());
    if (it->path().filename().string().starts_with("compile_logs_pid")) run.log_dir = it->path();
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
    if (alive(runs[pid], pid)) continue;
    for (const auto& path : runs[pid].paths)
      if (util::remove_tree(path).ok()) removed.push_back(path);
  }
  return removed;
}

} // namespace npc::launcher
