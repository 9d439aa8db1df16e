#pragma once
// Reading and writing the small files tests make and look at. A write that
// fails is a test failure: a test must never go on with a file it only
// believes it wrote.

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace npc::test {

namespace fs = std::filesystem;

// The whole file; "" when it is missing or unreadable.
std::string read_text(const fs::path& path);
// Creates the parent directories; a failed write is a test failure.
void write_text(const fs::path& path, const std::string& text);
// write_text, then mode 0755.
void write_executable(const fs::path& path, const std::string& text);
std::size_t count_lines(const fs::path& path); // 0 when missing
// Names in a directory, sorted (empty when it does not exist).
std::vector<std::string> names_in(const fs::path& dir);
// sha256 of a file's bytes; "" when it cannot be read.
std::string file_sha256(const fs::path& path);
// The bytes that begin a stand-in graph, up to the end of its module's name:
// "HloModule SyncTensorsGraph.27," for HLO text, the name field (written
// first: field 1, its length, the name) for a binary HloModuleProto. A
// fault matched on it (STANDIN_CC_FAULT_MATCH) strikes the graphs of that
// module only. "" when `graph` is neither.
std::string graph_module_marker(const std::string& graph);
// Of a run's graphs (their bytes), the index of the first whose module
// marker no other has: graphs of one step may share a module's name.
// graphs.size() when there is none.
std::size_t first_uniquely_marked(const std::vector<std::string>& graphs);

} // namespace npc::test
