#include <npc/cache/summary.hpp>

#include <charconv>
#include <climits>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <npc/cache/layout.hpp>
#include <npc/cache/leftover_temps.hpp>
#include <npc/util/fs.hpp>

namespace npc::cache {

namespace {

// The first line: what the file is, its format and how many records follow
// (a file cut short reads as empty, not as a smaller cache).
constexpr std::string_view kMagic = "npc-cache-summary";
constexpr int kFormat = 1;

// Which of an entry's known files a record says were there.
constexpr std::uint32_t kHasGraph = 1;
constexpr std::uint32_t kHasFlags = 2;
constexpr std::uint32_t kHasNeff = 4;
constexpr std::uint32_t kHasDone = 8;
constexpr std::uint32_t kHasLog = 16;
constexpr std::uint32_t kHasKilledLog = 32;

std::uint32_t files_of(const EntryInfo& e) {
  return (e.has_graph ? kHasGraph : 0u) | (e.has_flags ? kHasFlags : 0u) | (e.has_neff ? kHasNeff : 0u) |
         (e.has_done ? kHasDone : 0u) | (e.has_log ? kHasLog : 0u) | (e.has_killed_log ? kHasKilledLog : 0u);
}

// Reads one space- or newline-ended number and steps past its end.
template <typename Number> bool take_number(std::string_view& text, Number& value) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end == text.data() + text.size() || (*end != ' ' && *end != '\n')) return false;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()) + 1);
  return true;
}

bool take_word(std::string_view& text, std::string_view& word) {
  auto end = text.find_first_of(" \n");
  if (end == std::string_view::npos || end == 0 || text[end] != ' ') return false;
  word = text.substr(0, end);
  text.remove_prefix(end + 1);
  return true;
}

std::int64_t ns_of(const struct timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

} // namespace

Result<EntryInfo> look_again(const Entry& entry, const EntryInfo& listed, std::chrono::nanoseconds settle_time) {
  // A directory removed and made again may get the same inode number, and
  // within one tick of the file system's clock the same ctime: a stamp
  // proves the directory unchanged only once it is older than the settle
  // time (a listing's records are, by the same rule).
  auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  bool old_enough = listed.dir_stamp.ctime_ns < now_ns - settle_time.count();
  if (old_enough && is_settled(listed)) {
    SettledEntry record{listed.dir_stamp, files_of(listed), listed.bytes - listed.neff_bytes, listed.graph_bytes};
    if (auto recalled = recall_entry(AT_FDCWD, listed.dir.native(), record)) return recalled->info(listed.key, listed.dir);
  }
  return entry.inspect();
}

bool is_settled(const EntryInfo& e) {
  return e.state != EntryState::absent && e.state != EntryState::locked && !e.has_lock_file &&
         e.framework_lock.state == storage::LockState::absent && e.temp_files.empty();
}

std::optional<RecalledEntry> recall_entry(int version_fd, std::string_view module, const SettledEntry& record) {
  // "<module>/model.neff", on the stack: a listing does this 100,000 times.
  char path[PATH_MAX];
  if (module.size() + 1 + kNeffFile.size() >= sizeof path) return std::nullopt;
  module.copy(path, module.size());
  path[module.size()] = '\0';
  struct stat dir_stat {};
  if (::fstatat(version_fd, path, &dir_stat, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(dir_stat.st_mode))
    return std::nullopt;
  if (dir_stamp_of(dir_stat) != record.stamp) return std::nullopt;
  RecalledEntry recalled;
  recalled.record = &record;
  recalled.last_used = util::wall_time(dir_stat.st_mtim);
  if (record.files & kHasNeff) {
    // The one file read on every listing: its atime is the framework's use,
    // and its size is not bound to the directory's ctime.
    path[module.size()] = '/';
    kNeffFile.copy(path + module.size() + 1, kNeffFile.size());
    path[module.size() + 1 + kNeffFile.size()] = '\0';
    struct stat neff_stat {};
    if (::fstatat(version_fd, path, &neff_stat, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(neff_stat.st_mode))
      return std::nullopt;
    recalled.neff_bytes = static_cast<std::uint64_t>(neff_stat.st_size);
    recalled.last_used = std::max(recalled.last_used, util::wall_time(neff_stat.st_atim));
  }
  return recalled;
}

namespace {
void set_files(EntryInfo& info, std::uint32_t files) {
  info.has_graph = (files & kHasGraph) != 0;
  info.has_flags = (files & kHasFlags) != 0;
  info.has_neff = (files & kHasNeff) != 0;
  info.has_done = (files & kHasDone) != 0;
  info.has_log = (files & kHasLog) != 0;
  info.has_killed_log = (files & kHasKilledLog) != 0;
}
} // namespace

EntryState RecalledEntry::state() const {
  EntryInfo files;
  set_files(files, record->files);
  return state_from_files(files, false); // settled: no lock
}

EntryInfo RecalledEntry::info(CacheKey key, fs::path dir) const {
  EntryInfo info;
  info.key = std::move(key);
  info.dir = std::move(dir);
  info.dir_stamp = record->stamp;
  info.last_used = last_used;
  set_files(info, record->files);
  info.graph_bytes = record->graph_bytes;
  info.neff_bytes = neff_bytes;
  info.bytes = bytes();
  info.state = state_from_files(info, false);
  return info;
}

VersionSummary VersionSummary::load(const fs::path& file, TrustMode trust) {
  VersionSummary summary;
  int fd = util::open_for_reading(file, O_NOFOLLOW);
  if (fd < 0) return summary;
  util::UniqueFd owned(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return summary;
  // Whoever writes the summary decides what sizes a listing sees (and so
  // what eviction plans): in a private cache, only the user.
  if (trust == TrustMode::private_to_user && st.st_uid != ::geteuid()) return summary;
  // A record is under 100 bytes: a million entries' worth is the most read.
  auto text = util::read_fd(fd, 128u << 20);
  if (!text) return summary;
  summary.text_ = std::move(*text);

  std::string_view rest = summary.text_;
  std::string_view magic;
  int format = 0;
  std::size_t count = 0;
  if (!take_word(rest, magic) || magic != kMagic || !take_number(rest, format) || format != kFormat ||
      !take_number(rest, count))
    return {};
  summary.records_.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::string_view module;
    SettledEntry record;
    if (!take_word(rest, module) || !take_number(rest, record.stamp.inode) ||
        !take_number(rest, record.stamp.ctime_ns) || !take_number(rest, record.files) ||
        !take_number(rest, record.bytes_besides_neff) || !take_number(rest, record.graph_bytes))
      return {};
    summary.records_.push_back({static_cast<std::size_t>(module.data() - summary.text_.data()), module.size(), record});
  }
  if (!rest.empty()) return {};
  return summary;
}

std::vector<const SettledEntry*> VersionSummary::match(const std::vector<std::string>& modules) const {
  std::vector<const SettledEntry*> matched(modules.size(), nullptr);
  std::unordered_map<std::string_view, std::size_t> by_name; // built at the first name out of order
  std::size_t next = 0;
  for (std::size_t i = 0; i < modules.size(); ++i) {
    if (next < records_.size() && name_of(records_[next]) == modules[i]) {
      matched[i] = &records_[next++].entry;
      continue;
    }
    if (by_name.empty() && !records_.empty()) {
      by_name.reserve(records_.size());
      for (std::size_t r = 0; r < records_.size(); ++r) by_name.emplace(name_of(records_[r]), r);
    }
    if (auto it = by_name.find(modules[i]); it != by_name.end()) {
      matched[i] = &records_[it->second].entry;
      next = it->second + 1;
    }
  }
  return matched;
}

SummaryDraft::SummaryDraft(fs::path file, std::chrono::nanoseconds settle_time)
    : file_(file, 0644), dir_(file.parent_path()), settle_time_(settle_time) {
  if (!util::ensure_dir(file.parent_path()) || !file_.open()) return;
  struct stat st {};
  if (::fstat(file_.fd(), &st) != 0) return;
  open_ = true;
  started_ns_ = ns_of(st.st_mtim);
}

void SummaryDraft::keep(const std::string& module, const SettledEntry& record) {
  if (!open_) return;
  text_ += module;
  // One line, numbers in decimal: a reader checks each field's end.
  for (std::uint64_t n : {record.stamp.inode, static_cast<std::uint64_t>(record.stamp.ctime_ns),
                          static_cast<std::uint64_t>(record.files), record.bytes_besides_neff, record.graph_bytes}) {
    char digits[24];
    auto [end, error] = std::to_chars(digits, digits + sizeof digits, n);
    text_ += ' ';
    text_.append(digits, end);
  }
  text_ += '\n';
  ++count_;
}

void SummaryDraft::add(const std::string& module, const EntryInfo& entry) {
  if (!open_ || !is_settled(entry)) return;
  if (entry.dir_stamp.ctime_ns >= started_ns_ - settle_time_.count()) return;
  keep(module, {entry.dir_stamp, files_of(entry), entry.bytes - entry.neff_bytes, entry.graph_bytes});
  ++added_;
}

void SummaryDraft::commit() {
  if (!open_) return;
  open_ = false;
  std::string header = std::string(kMagic) + " " + std::to_string(kFormat) + " " + std::to_string(count_) + "\n";
  if (!file_.write(header) || !file_.write(text_)) return;
  if (!file_.commit()) return;
  // A listing killed by SIGKILL before its commit left its temp here (any
  // other signal's cleanup removes it): gone once it is stale.
  std::vector<std::string> temps;
  for (auto& name : util::list_names(dir_).value_or(std::vector<std::string>{}))
    if (util::is_temp_name(name)) temps.push_back(std::move(name));
  std::ignore = remove_dead_temps(dir_, temps, LockHeld::no, std::chrono::system_clock::now());
}

} // namespace npc::cache
