#include <npc/launcher/collect.hpp>

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/store.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/strings.hpp>

namespace npc::launcher {

namespace {

bool is_inside(const fs::path& path, const fs::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (r->empty()) continue; // trailing separator
    if (p == path.end() || *p != *r) return false;
  }
  return p != path.end();
}

} // namespace

namespace {

fs::path canonical_or_normal(const fs::path& path) {
  std::error_code ec;
  fs::path real = util::fully_resolved(path, ec);
  return ec ? fs::absolute(path).lexically_normal() : real;
}

} // namespace

Collector::Collector(const fs::path& cache_root, std::string compiler_version)
    : version_(std::move(compiler_version)) {
  roots_.push_back(canonical_or_normal(cache_root));
}

void Collector::refuse(const std::string& text, const std::string& source, const std::string& why) {
  // Each rank of the trial names its graphs, and the path log again: one
  // refusal per graph, as one compile per graph.
  if (!refused_texts_.insert(text).second) return;
  std::string line = "'" + text + "' (from " + source + "): " + why;
  refused_.push_back(line);
  if (refusals_[{source, why}]++ > 0) return;
  // Garbage can make a line of any length: the warning shows its start.
  constexpr std::size_t kShownChars = 300;
  std::string shown = text.size() <= kShownChars ? text : text.substr(0, kShownChars) + "...";
  spdlog::warn("refusing graph '{}' (from {}): {}", shown, source, why);
}

void Collector::say_repeated_refusals() {
  for (auto& [source_why, count] : refusals_) {
    if (count > 1)
      spdlog::warn("refused {} more from {} for the same reason: {}", count - 1, source_why.first, source_why.second);
    count = 1;
  }
}

bool Collector::known_root(const fs::path& root) const {
  return std::find(roots_.begin(), roots_.end(), root) != roots_.end();
}

bool Collector::add_root(const std::string& text, const std::string& source) {
  std::string url(util::trim(text));
  if (url.starts_with("file://")) url.erase(0, 7);
  fs::path root(url);
  if (url.find("://") != std::string::npos || !root.is_absolute()) {
    refuse(text, source,
           url.find("://") != std::string::npos
               ? "a cache URL other than the launcher's (set NEURON_COMPILE_CACHE_URL to it, and the "
                 "launcher compiles into it)"
               : "not an absolute path");
    return false;
  }
  fs::path real = canonical_or_normal(root);
  std::error_code ec;
  // The framework names a root it has written graphs into.
  if (!known_root(real) && !fs::is_directory(real, ec)) {
    refuse(text, source, "no such directory");
    return false;
  }
  if (!known_root(real)) {
    roots_.push_back(real);
    spdlog::debug("cache root {} (from {})", real.string(), source);
  }
  return true;
}

void Collector::add_path_log_line(const std::string& line) {
  const std::string source = "the cache-path log";
  fs::path path(util::trim(line));
  if (path.empty()) return;
  if (path.filename() != cache::kGraphFile) {
    std::ignore = add_root(line, source);
    return;
  }
  // A graph path of an older release: its root is the framework's too.
  fs::path above_version = path.parent_path().parent_path();
  if (path.is_absolute() && above_version.has_parent_path() &&
      above_version.filename().string().starts_with(cache::kVersionDirPrefix))
    std::ignore = add_root(above_version.parent_path().string(), source);
  add_graph_path(line, source);
}

void Collector::add_graph_path(const std::string& text, const std::string& source) {
  auto refuse = [&](const std::string& why) { this->refuse(text, source, why); };
  fs::path path(util::trim(text));
  if (path.empty()) return;
  if (!path.is_absolute()) return refuse("not an absolute path");
  std::error_code ec;
  fs::path real = util::fully_resolved(path, ec);
  if (ec) return refuse("cannot be resolved: " + ec.message());
  auto inside = std::find_if(roots_.begin(), roots_.end(), [&](const fs::path& r) { return is_inside(real, r); });
  if (inside == roots_.end()) {
    std::string names;
    for (const auto& r : roots_) names += (names.empty() ? "" : " and ") + r.string();
    return refuse("outside the cache " + names);
  }
  if (real.filename() != cache::kGraphFile)
    return refuse("not a " + std::string(cache::kGraphFile) + " file");
  fs::path entry = real.parent_path();
  auto key = cache::parse_key(entry.string());
  if (!key) return refuse("not in a cache entry directory");
  // A graph's root is the directory above its neuronxcc-*. Older releases
  // put the cache of --cache_dir=DIR at DIR/neuron-compile-cache and name no
  // root in the cache-path log: such a root, inside one we know, is learned
  // from the graph's own path.
  fs::path graph_root = entry.parent_path().parent_path();
  if (!known_root(graph_root)) {
    // Never a root inside another entry's version directory.
    for (const auto& part : graph_root.lexically_relative(*inside))
      if (part.string().starts_with(cache::kVersionDirPrefix)) return refuse("not in a cache entry directory");
    roots_.push_back(graph_root);
    spdlog::debug("cache root {} (from the graph path {})", graph_root.string(), real.string());
  }
  if (key->compiler_version != version_)
    return refuse("extracted for compiler version " + key->compiler_version + ", but we compile with " + version_);
  if (!fs::is_regular_file(real, ec)) return refuse("no such graph file");
  if (seen_.insert(entry.string()).second) entries_.push_back(std::move(entry));
}

void Collector::add_entry_dir(const fs::path& entry_dir) {
  if (seen_.insert(entry_dir.string()).second) entries_.push_back(entry_dir);
}

std::size_t Collector::add_pending_written_since(fs::file_time_type since) {
  std::size_t added = 0;
  for (const auto& root : roots_) {
    std::vector<cache::EntryInfo> listed;
    try {
      listed = cache::Cache(root).list_version(version_);
    } catch (const std::exception& e) {
      spdlog::warn("cannot list the cache {} for extracted graphs: {}", root.string(), e.what());
      continue;
    }
    for (const auto& e : listed) {
      if (e.state != cache::EntryState::pending) continue;
      std::error_code ec;
      auto written = fs::last_write_time(e.dir / cache::kGraphFile, ec);
      if (ec || written < since) continue;
      if (seen_.insert(e.dir.string()).second) {
        entries_.push_back(e.dir);
        ++added;
      }
    }
  }
  return added;
}

std::vector<fs::path> Collector::take_entries() {
  seen_ = {};
  return std::exchange(entries_, {});
}

std::vector<std::string> read_path_log(const fs::path& path) {
  std::vector<std::string> lines;
  auto text = util::read_file(path);
  if (!text) return lines;
  std::string_view whole(*text);
  if (whole.ends_with('\n')) whole.remove_suffix(1);
  std::error_code ec;
  if (whole.find('\n') != std::string_view::npos && fs::path(whole).is_absolute() &&
      fs::is_directory(fs::path(whole), ec)) {
    lines.emplace_back(whole);
    return lines;
  }
  size_t start = 0;
  while (start < text->size()) {
    size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    auto line = util::trim(std::string_view(*text).substr(start, end - start));
    if (!line.empty()) lines.emplace_back(line);
    start = end + 1;
  }
  return lines;
}

} // namespace npc::launcher
