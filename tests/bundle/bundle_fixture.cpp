#include "bundle_fixture.hpp"

#include <algorithm>
#include <memory>
#include <regex>
#include <sys/stat.h>

#include <archive.h>
#include <archive_entry.h>

#include <npc/util/sha256.hpp>

namespace npc::test {

namespace {

struct WriterFree {
  void operator()(struct archive* a) const { archive_write_free(a); }
};
struct ReaderFree {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
struct EntryFree {
  void operator()(struct archive_entry* e) const { archive_entry_free(e); }
};

} // namespace

void write_bundle(const fs::path& path, const std::vector<Member>& members) {
  std::unique_ptr<struct archive, WriterFree> a(archive_write_new());
  ASSERT_GE(archive_write_add_filter_zstd(a.get()), ARCHIVE_WARN);
  ASSERT_EQ(archive_write_set_format_pax_restricted(a.get()), ARCHIVE_OK);
  ASSERT_EQ(archive_write_open_filename(a.get(), path.c_str()), ARCHIVE_OK) << archive_error_string(a.get());
  for (const auto& m : members) {
    std::unique_ptr<struct archive_entry, EntryFree> e(archive_entry_new());
    archive_entry_set_pathname(e.get(), m.name.c_str());
    archive_entry_set_perm(e.get(), 0644);
    switch (m.type) {
    case Member::Type::file:
      archive_entry_set_filetype(e.get(), AE_IFREG);
      archive_entry_set_size(e.get(), static_cast<la_int64_t>(m.data.size()));
      break;
    case Member::Type::symlink:
      archive_entry_set_filetype(e.get(), AE_IFLNK);
      archive_entry_set_symlink(e.get(), m.link.c_str());
      break;
    case Member::Type::hardlink:
      archive_entry_set_filetype(e.get(), AE_IFREG);
      archive_entry_set_hardlink(e.get(), m.link.c_str());
      archive_entry_set_size(e.get(), 0);
      break;
    case Member::Type::directory:
      archive_entry_set_filetype(e.get(), AE_IFDIR);
      archive_entry_set_perm(e.get(), 0755);
      break;
    }
    ASSERT_GE(archive_write_header(a.get(), e.get()), ARCHIVE_WARN) << archive_error_string(a.get());
    if (m.type == Member::Type::file && !m.data.empty()) {
      ASSERT_EQ(archive_write_data(a.get(), m.data.data(), m.data.size()), static_cast<la_ssize_t>(m.data.size()));
    }
  }
  ASSERT_EQ(archive_write_close(a.get()), ARCHIVE_OK);
}

std::vector<Member> read_bundle(const fs::path& path) {
  std::vector<Member> members;
  std::unique_ptr<struct archive, ReaderFree> a(archive_read_new());
  archive_read_support_filter_zstd(a.get());
  archive_read_support_format_tar(a.get());
  EXPECT_EQ(archive_read_open_filename(a.get(), path.c_str(), 1 << 16), ARCHIVE_OK);
  struct archive_entry* e = nullptr;
  while (archive_read_next_header(a.get(), &e) == ARCHIVE_OK) {
    Member m;
    m.name = archive_entry_pathname(e);
    if (archive_entry_filetype(e) == AE_IFREG) {
      char buffer[65536];
      la_ssize_t n;
      while ((n = archive_read_data(a.get(), buffer, sizeof buffer)) > 0) m.data.append(buffer, static_cast<size_t>(n));
    } else {
      m.type = archive_entry_filetype(e) == AE_IFLNK ? Member::Type::symlink : Member::Type::directory;
    }
    members.push_back(std::move(m));
  }
  return members;
}

nlohmann::json bundle_manifest(const fs::path& path) {
  auto members = read_bundle(path);
  if (members.empty() || members.front().name != "manifest.json") {
    ADD_FAILURE() << path << " has no manifest.json first";
    return {};
  }
  return nlohmann::json::parse(members.front().data);
}

std::string sha256_of(const std::string& data) { return util::sha256_hex(data); }

std::map<std::string, std::string> tree_state(const fs::path& root) {
  std::map<std::string, std::string> state;
  auto describe = [](const fs::path& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return std::string("missing");
    return std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " +
           std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + " ino " +
           std::to_string(st.st_ino);
  };
  state["."] = describe(root);
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it)
    state[fs::relative(it->path(), root).string()] = describe(it->path());
  return state;
}

long summary_field(const std::string& out, const std::string& field) {
  std::smatch m;
  std::regex total("standin_train: total:.*\\b" + field + "=([0-9]+)");
  if (std::regex_search(out, m, total)) return std::stol(m[1]);
  std::regex rank("standin_train: rank .*\\b" + field + "=([0-9]+)");
  if (std::regex_search(out, m, rank)) return std::stol(m[1]);
  return -1;
}

std::map<std::string, std::string> BundleTest::env_for(const fs::path& base,
                                                       std::map<std::string, std::string> extra) const {
  std::map<std::string, std::string> env = {{"NEURON_CC_FLAGS", "--cache_dir=" + base.string()}};
  for (auto& [k, v] : extra) env[k] = v;
  return env;
}

RunResult BundleTest::tool_in(const fs::path& base, const std::string& name, std::vector<std::string> args,
                              std::map<std::string, std::string> extra) const {
  return run_tool(name, std::move(args), env_for(base, std::move(extra)));
}

RunResult BundleTest::train_in(const fs::path& base, std::vector<std::string> args,
                               std::map<std::string, std::string> extra) const {
  return tool_in(base, "standin_train", std::move(args), std::move(extra));
}

nlohmann::json BundleTest::cache_json(const fs::path& base, std::vector<std::string> args, int expected_exit,
                                      std::map<std::string, std::string> extra) const {
  args.insert(args.begin(), "--json");
  auto r = tool_in(base, "neuron_cache", args, std::move(extra));
  EXPECT_EQ(r.exit_code, expected_exit) << r.describe();
  auto doc = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(doc.is_discarded()) << r.describe();
  return doc.is_discarded() ? nlohmann::json::object() : doc;
}

namespace {
std::vector<std::string> keys_where(const fs::path& cache_root, bool done_only) {
  std::vector<std::string> keys;
  std::error_code ec;
  for (fs::directory_iterator v(cache_root, ec), end; !ec && v != end; v.increment(ec)) {
    std::string version = v->path().filename().string();
    if (!version.starts_with("neuronxcc-")) continue;
    for (fs::directory_iterator m(v->path(), ec), end2; !ec && m != end2; m.increment(ec)) {
      if (!m->path().filename().string().starts_with("MODULE_")) continue;
      if (done_only && !(fs::exists(m->path() / "model.done") && fs::exists(m->path() / "model.neff"))) continue;
      keys.push_back(version + "/" + m->path().filename().string());
    }
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}
} // namespace

std::vector<std::string> BundleTest::done_keys(const fs::path& cache_root) { return keys_where(cache_root, true); }
std::vector<std::string> BundleTest::all_keys(const fs::path& cache_root) { return keys_where(cache_root, false); }

std::vector<fs::path> BundleTest::graphs_in(const fs::path& workdir) {
  std::vector<fs::path> graphs;
  for (const auto& e : fs::recursive_directory_iterator(workdir))
    if (e.path().extension() == ".hlo" && e.path().parent_path().filename() == "rank-0") graphs.push_back(e.path());
  std::sort(graphs.begin(), graphs.end());
  return graphs;
}

fs::path BundleTest::compiler_copy(const std::string& name) const {
  fs::path copy = dir() / name / "neuronx-cc";
  fs::create_directories(copy.parent_path());
  fs::copy_file(standin_compiler(), copy, fs::copy_options::overwrite_existing);
  fs::permissions(copy, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  return copy;
}

} // namespace npc::test
