#include "files.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include <npc/util/fs.hpp>
#include <npc/util/sha256.hpp>

namespace npc::test {

// A plain read, as the framework and any other program reads: unlike the
// project's own reads (util::open_for_reading), it moves the atime.
std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::string();
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_text(const fs::path& path, const std::string& text) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) ADD_FAILURE() << "cannot write " << path << ": " << std::strerror(errno);
}

void write_executable(const fs::path& path, const std::string& text) {
  write_text(path, text);
  std::error_code ec;
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec, ec);
  if (ec) ADD_FAILURE() << "cannot make " << path << " executable: " << ec.message();
}

std::size_t count_lines(const fs::path& path) {
  std::string text = read_text(path);
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string file_sha256(const fs::path& path) {
  auto digest = util::sha256_file(path);
  return digest ? digest->sha256 : std::string();
}

std::string graph_module_marker(const std::string& graph) {
  if (graph.rfind("HloModule ", 0) == 0) {
    const std::size_t comma = graph.find(',');
    return comma == std::string::npos ? "" : graph.substr(0, comma + 1);
  }
  // A name shorter than 128 bytes has a one-byte length.
  if (graph.size() < 2 || graph[0] != '\x0a' || static_cast<unsigned char>(graph[1]) >= 0x80) return "";
  const std::size_t end = 2 + static_cast<unsigned char>(graph[1]);
  return end <= graph.size() ? graph.substr(0, end) : "";
}

std::size_t first_uniquely_marked(const std::vector<std::string>& graphs) {
  std::vector<std::string> markers;
  for (const auto& graph : graphs) markers.push_back(graph_module_marker(graph));
  for (std::size_t i = 0; i < markers.size(); ++i)
    if (!markers[i].empty() && std::count(markers.begin(), markers.end(), markers[i]) == 1) return i;
  return graphs.size();
}

} // namespace npc::test
