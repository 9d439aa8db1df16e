#pragma once
// What the bundle and secondary-cache tests share: caches other than the
// fixture's own, running the training script against one, reading and
// crafting bundles with libarchive.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace npc::test {

// One member of a tar archive, as the tests write or read it.
struct Member {
  enum class Type { file, symlink, hardlink, directory };
  Member() = default;
  Member(std::string name_, std::string data_, Type type_ = Type::file, std::string link_ = {})
      : name(std::move(name_)), data(std::move(data_)), type(type_), link(std::move(link_)) {}
  std::string name;
  std::string data;
  Type type = Type::file;
  std::string link; // symlink or hardlink target
};

// Writes a tar.zst (pax) with these members, in order.
void write_bundle(const fs::path& path, const std::vector<Member>& members);
// Every member of a tar.zst, in order (data of regular files only).
std::vector<Member> read_bundle(const fs::path& path);
nlohmann::json bundle_manifest(const fs::path& path);

std::string sha256_of(const std::string& data);

// "<path> -> type size mtime mode" for every file and directory under root.
std::map<std::string, std::string> tree_state(const fs::path& root);

// jit_compiles / cache_hits of the "standin_train: total:" line (or of the
// single rank's line); -1 when absent.
long summary_field(const std::string& out, const std::string& field);

class BundleTest : public CacheTest {
protected:
  // A cache other than the fixture's: NEURON_CC_FLAGS=--cache_dir=<base>.
  [[nodiscard]] fs::path base(const std::string& name) const { return dir() / name; }
  [[nodiscard]] static fs::path root_of(const fs::path& base) { return base; }
  [[nodiscard]] std::map<std::string, std::string> env_for(const fs::path& base,
                                                           std::map<std::string, std::string> extra = {}) const;
  RunResult tool_in(const fs::path& base, const std::string& name, std::vector<std::string> args,
                    std::map<std::string, std::string> extra = {}) const;
  RunResult train_in(const fs::path& base, std::vector<std::string> args,
                     std::map<std::string, std::string> extra = {}) const;
  // Runs neuron_cache with --json and parses its output.
  nlohmann::json cache_json(const fs::path& base, std::vector<std::string> args, int expected_exit,
                            std::map<std::string, std::string> extra = {}) const;
  // Done entries (any compiler version) as "neuronxcc-<v>/MODULE_<g>+<f>", sorted.
  [[nodiscard]] static std::vector<std::string> done_keys(const fs::path& cache_root);
  // Every entry directory (any state), as keys.
  [[nodiscard]] static std::vector<std::string> all_keys(const fs::path& cache_root);
  // The graphs the training script wrote to its kept work directory.
  [[nodiscard]] static std::vector<fs::path> graphs_in(const fs::path& workdir);
  // A copy of the stand-in compiler at another path, so its remembered
  // version is its own (the memo is per compiler binary).
  [[nodiscard]] fs::path compiler_copy(const std::string& name) const;
};

} // namespace npc::test
