#include <npc/launcher/collect.hpp>

#include <utility>

#include <spdlog/spdlog.h>

#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
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

Collector::Collector(const fs::path& cache_root, std::string compiler_version)
    : version_(std::move(compiler_version)) {
  std::error_code ec;
  root_ = fs::weakly_canonical(cache_root, ec);
  if (ec) root_ = fs::absolute(cache_root).lexically_normal();
}

void Collector::add_graph_path(const std::string& text, const std::string& source) {
  auto refuse = [&](const std::string& why) {
    std::string line = "'" + text + "' (from " + source + "): " + why;
    spdlog::warn("refusing graph {}", line);
    refused_.push_back(line);
  };
  fs::path path(util::trim(text));
  if (path.empty()) return;
  if (!path.is_absolute()) return refuse("not an absolute path");
  std::error_code ec;
  fs::path real = fs::weakly_canonical(path, ec);
  if (ec) return refuse("cannot be resolved: " + ec.message());
  if (!is_inside(real, root_)) return refuse("outside the cache " + root_.string());
  if (real.filename() != cache::kGraphFile)
    return refuse("not a " + std::string(cache::kGraphFile) + " file");
  fs::path entry = real.parent_path();
  auto key = cache::parse_key(entry.string());
  if (!key || entry.parent_path().parent_path() != root_)
    return refuse("not in a cache entry directory");
  if (key->compiler_version != version_)
    return refuse("extracted for compiler version " + key->compiler_version + ", but we compile with " + version_);
  if (!fs::is_regular_file(real, ec)) return refuse("no such graph file");
  if (seen_.insert(entry.string()).second) entries_.push_back(std::move(entry));
}

void Collector::add_entry_dir(const fs::path& entry_dir) {
  if (seen_.insert(entry_dir.string()).second) entries_.push_back(entry_dir);
}

std::vector<fs::path> Collector::take_entries() {
  seen_ = {};
  return std::exchange(entries_, {});
}

std::vector<std::string> read_path_log(const fs::path& path) {
  std::vector<std::string> lines;
  auto text = util::read_file(path);
  if (!text) return lines;
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
