#include <npc/compile/compiler.hpp>

#include <cctype>
#include <cerrno>
#include <csignal>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/key.hpp>
#include <npc/compile/masquerade.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/process.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/strings.hpp>

namespace npc::compile {

namespace {

// `--version` of the real compiler imports a large Python package; a minute
// is far beyond what a healthy one needs.
constexpr int kVersionTimeoutSeconds = 60;
// Bound what we keep of a misbehaving compiler's --version output.
constexpr size_t kMaxVersionOutput = 64 * 1024;

// Names the compiler's memoised version: the file the path leads to (its
// device and inode, whatever links lead there) as it is now (size and
// modification time), so a compiler replaced or rebuilt is asked again. One
// stat: a hit starts once per graph, and resolving the path component by
// component cost a readlink each.
std::string fingerprint(const fs::path& compiler) {
  struct stat st {};
  if (::stat(compiler.c_str(), &st) != 0) return "";
  std::string id = "file " + std::to_string(st.st_dev) + " " + std::to_string(st.st_ino) + "\n" +
                   std::to_string(st.st_size) + "\n" + std::to_string(st.st_mtim.tv_sec) + "." +
                   std::to_string(st.st_mtim.tv_nsec);
  return util::sha256_hex(id).substr(0, 24);
}

std::string ask_version(const fs::path& compiler) {
  util::SpawnOptions options;
  options.argv = {compiler.string(), "--version"};
  options.output = util::OutputTo::pipe;
  auto child = util::spawn(options);
  if (!child)
    throw EnvironmentError("cannot run the compiler " + compiler.string() + ": " + child.error());
  util::UniqueFd out(child->output_fd);
  std::string text;
  char buffer[4096];
  auto deadline = util::monotonic_seconds() + kVersionTimeoutSeconds;
  bool timed_out = false;
  for (;;) {
    int left_ms = static_cast<int>((deadline - util::monotonic_seconds()) * 1000);
    if (left_ms <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p {out.get(), POLLIN, 0};
    int ready = ::poll(&p, 1, left_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    ssize_t n = ::read(out.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break; // closed: the compiler has exited or is about to
    if (text.size() < kMaxVersionOutput) text.append(buffer, static_cast<size_t>(n));
  }
  if (timed_out) util::kill_process_group(child->pid, SIGKILL);
  util::ExitStatus status = util::wait_child(child->pid);
  if (timed_out)
    throw EnvironmentError("the compiler " + compiler.string() + " did not answer `--version` within " +
                           std::to_string(kVersionTimeoutSeconds) + "s");
  auto version = parse_version_output(text);
  if (!status.success() || !version)
    throw EnvironmentError("cannot learn the version of the compiler " + compiler.string() +
                           ": `--version` ended with " + status.describe() +
                           (version ? "" : " and printed no version") +
                           " (point at a working neuronx-cc with --compiler or NEURON_CC)");
  return *version;
}

} // namespace

fs::path locate_compiler(const std::optional<std::string>& from_command_line) {
  // Each way of naming it resolves past our own programs (masquerade.hpp):
  // NEURON_CC=neuronx-cc with the masquerade directory first on PATH is the
  // real compiler further on, as the default is.
  if (from_command_line) {
    auto found = find_compiler_named(*from_command_line);
    if (!found)
      throw EnvironmentError("--compiler " + *from_command_line + ": " + found.error() +
                             "; name the real neuronx-cc with --compiler PATH");
    return *found;
  }
  if (auto from_env = util::env(kCompilerEnv); from_env && !from_env->empty()) {
    auto found = find_compiler_named(*from_env);
    if (!found)
      throw EnvironmentError(std::string(kCompilerEnv) + "=" + *from_env + ": " + found.error() + "; set " +
                             kCompilerEnv + " to the real neuronx-cc, or unset it to use neuronx-cc on PATH");
    return *found;
  }
  auto found = find_compiler_named(kCompilerName);
  if (!found)
    throw EnvironmentError("the Neuron compiler was not found: no --compiler, no " +
                           std::string(kCompilerEnv) + ", and " + found.error() +
                           "; install neuronx-cc or point at it with --compiler PATH or " +
                           kCompilerEnv + "=PATH");
  return *found;
}

std::optional<std::string> parse_version_output(std::string_view output) {
  size_t i = 0;
  while (i < output.size()) {
    // A token starts at a digit that begins a word.
    if (std::isdigit(static_cast<unsigned char>(output[i])) &&
        (i == 0 || std::isspace(static_cast<unsigned char>(output[i - 1])) || output[i - 1] == 'v' ||
         output[i - 1] == '=' || output[i - 1] == ':')) {
      size_t end = i;
      while (end < output.size() && !std::isspace(static_cast<unsigned char>(output[end]))) ++end;
      std::string token(output.substr(i, end - i));
      while (!token.empty() && (token.back() == ',' || token.back() == ';' || token.back() == ')'))
        token.pop_back();
      // "version-like": digits, a dot, more digits.
      size_t dot = token.find('.');
      if (dot != std::string::npos && dot + 1 < token.size() &&
          std::isdigit(static_cast<unsigned char>(token[dot + 1])) &&
          cache::valid_compiler_version(token))
        return token;
      i = end;
      continue;
    }
    ++i;
  }
  return std::nullopt;
}

std::string compiler_version(const fs::path& compiler, const fs::path& memo_dir) {
  std::string id = fingerprint(compiler);
  fs::path memo = (memo_dir.empty() || id.empty()) ? fs::path() : memo_dir / id;
  if (!memo.empty()) {
    if (auto text = util::read_file(memo)) {
      std::string version(util::trim(*text));
      if (cache::valid_compiler_version(version)) return version;
    }
  }
  std::string version = ask_version(compiler);
  if (!memo.empty()) {
    // Best effort: a read-only cache still works, it just asks every time.
    if (util::ensure_dir(memo_dir))
      std::ignore = util::write_file_atomic(memo, version + "\n");
  }
  spdlog::debug("compiler {} has version {}", compiler.string(), version);
  return version;
}

} // namespace npc::compile
