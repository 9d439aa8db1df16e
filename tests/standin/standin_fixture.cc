#include "standin_fixture.h"

#include <filesystem>
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

std::string StandinFixture::write_file(const std::string& name, const std::string& contents) const {
  const std::string full = path(name);
  npc::test::write_text(full, contents);
  return full;
}

std::string StandinFixture::write_script(const std::string& name, const std::string& contents) const {
  const std::string full = path(name);
  npc::test::write_executable(full, contents);
  return full;
}

bool StandinFixture::exists(const std::string& file) const { return std::filesystem::exists(file); }

Env StandinFixture::fast_compiler_env() {
  return {{"STANDIN_CC_BASE_MS", kFastBaseMs}, {"STANDIN_CC_BYTES_PER_SEC", kFastBytesPerSec}};
}

npc::test::RunOptions StandinFixture::options(const Env& env) const {
  npc::test::RunOptions options;
  options.set_env = env;
  options.timeout = kStandinTimeout;
  return options;
}

std::string StandinFixture::next_capture_stem() const { return path("process-" + std::to_string(captures_++)); }

RunResult StandinFixture::run(const std::vector<std::string>& argv, const Env& env) const {
  return npc::test::run(argv, options(env));
}

Child StandinFixture::start(const std::vector<std::string>& argv, const Env& env) const {
  return Child(argv, options(env), next_capture_stem());
}

RunResult StandinFixture::run_compiler(const std::vector<std::string>& args, const Env& env) const {
  return run(compiler_argv(args), merged(fast_compiler_env(), env));
}

Child StandinFixture::start_compiler(const std::vector<std::string>& args, const Env& env) const {
  return start(compiler_argv(args), merged(fast_compiler_env(), env));
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

std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> found;
  for (const std::string& line : split_lines(text)) {
    if (line.find(needle) != std::string::npos) found.push_back(line);
  }
  return found;
}

std::string header_field(const std::string& neff, const std::string& key) {
  const std::string prefix = key + ": ";
  for (const std::string& line : split_lines(neff.substr(0, neff.find("end-header")))) {
    if (line.compare(0, prefix.size(), prefix) == 0) return line.substr(prefix.size());
  }
  return "";
}

}  // namespace standin::test
