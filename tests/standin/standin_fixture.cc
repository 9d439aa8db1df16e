#include "standin_fixture.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace standin::test {
namespace {

constexpr char kFastBaseMs[] = "1";
constexpr char kFastBytesPerSec[] = "1000000000000";

Env merged(Env base, const Env& extra) {
  for (const auto& [name, value] : extra) base[name] = value;
  return base;
}

std::vector<std::string> compiler_argv(const std::vector<std::string>& args) {
  std::vector<std::string> argv{kCompilerBinary};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

void StandinFixture::SetUp() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/standin-test.XXXXXX";
  ASSERT_NE(mkdtemp(pattern.data()), nullptr) << "mkdtemp failed for " << pattern;
  dir_ = pattern;
}

void StandinFixture::TearDown() {
  if (dir_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string StandinFixture::write_file(const std::string& name, const std::string& contents) const {
  const std::string full = path(name);
  std::ofstream out(full, std::ios::binary | std::ios::trunc);
  out << contents;
  out.close();
  EXPECT_TRUE(out) << "cannot write " << full;
  return full;
}

std::string StandinFixture::write_script(const std::string& name, const std::string& contents) const {
  const std::string full = write_file(name, contents);
  EXPECT_EQ(chmod(full.c_str(), 0755), 0);
  return full;
}

std::string StandinFixture::read_file(const std::string& file) const {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

bool StandinFixture::exists(const std::string& file) const { return std::filesystem::exists(file); }

std::vector<std::string> StandinFixture::list_dir(const std::string& directory) const {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Env StandinFixture::fast_compiler_env() {
  return {{"STANDIN_CC_BASE_MS", kFastBaseMs}, {"STANDIN_CC_BYTES_PER_SEC", kFastBytesPerSec}};
}

ProcessResult StandinFixture::run_compiler(const std::vector<std::string>& args, const Env& env) const {
  return run(compiler_argv(args), merged(fast_compiler_env(), env));
}

Process StandinFixture::start_compiler(const std::vector<std::string>& args, const Env& env) const {
  return Process(compiler_argv(args), merged(fast_compiler_env(), env), dir_);
}

std::string make_graph_text(std::size_t bytes, const std::string& tag) {
  std::string text = "HloModule test_" + tag + "\n\nENTRY %main (p0: f32[4]) -> f32[4] {\n";
  const std::string filler = "  %add = f32[4]{0} add(f32[4]{0} %p0, f32[4]{0} %p0)\n";
  while (text.size() < bytes) text += filler;
  text.resize(bytes);
  return text;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  std::string line;
  while (std::getline(stream, line)) lines.push_back(line);
  return lines;
}

std::string header_field(const std::string& neff, const std::string& key) {
  const std::string prefix = key + ": ";
  for (const std::string& line : split_lines(neff.substr(0, neff.find("end-header")))) {
    if (line.compare(0, prefix.size(), prefix) == 0) return line.substr(prefix.size());
  }
  return "";
}

}  // namespace standin::test
