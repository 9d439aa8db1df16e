#include <npc/compile/masquerade.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <set>
#include <string_view>

#include <sys/stat.h>
#include <unistd.h>

#include <npc/compile/compiler.hpp>
#include <npc/util/build_note.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/input_file.hpp>
#include <npc/util/process.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/strings.hpp>

namespace npc::compile {

namespace {

// The real compiler's options that take a value (`--opt value` or
// `--opt=value`), from `neuronx-cc compile --help`.
constexpr std::array kValueOptions = {
    std::string_view("--framework"),  std::string_view("--target"),     std::string_view("--model-type"),
    std::string_view("--auto-cast"),  std::string_view("--auto-cast-type"), std::string_view("--optlevel"),
    std::string_view("--distribution-strategy"), std::string_view("--verbose"), std::string_view("--lnc"),
    std::string_view("--logical-nc-config"), std::string_view("--pipeline"), std::string_view("--tensorizer-options"),
    std::string_view("--logfile"),    std::string_view("--workdir"),    std::string_view("--output"),
    std::string_view("-o"),           std::string_view("-O")};
// Switches: never followed by a value of theirs.
constexpr std::array kSwitches = {
    std::string_view("-O1"), std::string_view("-O2"), std::string_view("-O3"),
    std::string_view("--enable-fast-loading-neuron-binaries"), std::string_view("--enable-saturate-infinity"),
    std::string_view("--enable-mixed-precision-accumulation"), std::string_view("--framework-version-check")};
// Options that only say where to write: fresh temporary paths on every run.
constexpr std::array kWhereOptions = {std::string_view("--output"), std::string_view("-o"),
                                      std::string_view("--logfile"), std::string_view("--workdir")};

template <std::size_t N>
bool one_of(std::string_view word, const std::array<std::string_view, N>& names) {
  return std::find(names.begin(), names.end(), word) != names.end();
}

// "--opt=value" -> "--opt"; anything else as it is.
std::string_view option_name(std::string_view word) {
  auto eq = word.find('=');
  return eq == std::string_view::npos ? word : word.substr(0, eq);
}

// Characters of a path in a graph's text or protobuf strings.
bool path_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' || c == '.' ||
         c == '_' || c == '-' || c == '+' || c == '@' || c == '~' || c == ',' || c == '=';
}

// A maximal run of path characters that starts with '/' and has a second
// component, as a candidate: "/home/u/kernel.py", not "/" or "/2".
bool looks_like_path(std::string_view run) {
  return run.size() > 2 && run.front() == '/' && run.find('/', 1) != std::string_view::npos &&
         run.find("//") == std::string_view::npos;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// "neuron-parallel-compile 0.1.0"; no version for a release before the note.
std::string ours_named(const std::string& version) {
  return "neuron-parallel-compile" + (version.empty() ? "" : " " + version);
}

bool same_file(const fs::path& a, const fs::path& b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

} // namespace

std::optional<RealCompilerCall> parse_real_compiler_call(const std::vector<std::string>& words, std::string& why) {
  if (words.empty() || words.front() != "compile") {
    why = "not a compile";
    return std::nullopt;
  }
  RealCompilerCall call;
  call.words = words;
  std::vector<std::size_t> positionals;
  bool has_output = false;
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word == "-h" || word == "--help") {
      why = "asks for help";
      return std::nullopt;
    }
    if (word.size() < 2 || word.front() != '-') {
      positionals.push_back(i);
      continue;
    }
    const std::string_view name = option_name(word);
    const bool attached = name.size() != word.size();
    if (one_of(name, kSwitches) || word.starts_with("--internal-")) {
      call.key_flags.push_back(word);
      continue;
    }
    if (!one_of(name, kValueOptions)) {
      if (attached) {
        call.key_flags.push_back(word);
        continue;
      }
      why = "the option " + word + " is not known to take a value or not";
      return std::nullopt;
    }
    std::size_t value_word = i;
    if (!attached) {
      if (i + 1 >= words.size()) {
        why = "the option " + word + " has no value";
        return std::nullopt;
      }
      value_word = ++i;
    }
    const std::string value = attached ? word.substr(name.size() + 1) : words[value_word];
    if (name == "--output" || name == "-o") {
      has_output = true;
      call.output = value;
      call.output_word = value_word;
      call.output_attached = attached;
    }
    if (one_of(name, kWhereOptions)) continue;
    call.key_flags.push_back(word);
    if (!attached) call.key_flags.push_back(value);
  }
  if (positionals.size() != 1) {
    why = positionals.empty() ? "no input file" : "more than one input file";
    return std::nullopt;
  }
  if (!has_output || call.output.empty()) {
    why = "no --output";
    return std::nullopt;
  }
  call.input = words[positionals.front()];
  return call;
}

std::vector<std::string> with_output(const RealCompilerCall& call, const fs::path& neff) {
  std::vector<std::string> words = call.words;
  std::string& word = words[call.output_word];
  word = call.output_attached ? std::string(option_name(word)) + "=" + neff.string() : neff.string();
  return words;
}

bool is_our_program(const fs::path& candidate, std::string* version) {
  if (auto ours = util::build_of_ours(candidate)) {
    if (version) *version = *ours;
    return true;
  }
  std::error_code ec;
  return fs::is_symlink(candidate, ec) && fs::canonical(candidate, ec).filename() == "neuron_cc_wrapper";
}

Result<fs::path> find_compiler_named(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    auto found = util::find_executable(name, util::env("PATH"));
    if (!found) return fail(found.error());
    std::string version;
    if (is_our_program(*found, &version))
      return fail(name + " is a program of " + ours_named(version) + ", not the Neuron compiler");
    return fs::absolute(*found);
  }
  std::string passed_over; // "a (neuron-parallel-compile 0.1.0), b (...)"
  auto found = util::find_executable(name, util::env("PATH"), [&](const fs::path& candidate) {
    std::string its_version;
    if (!is_our_program(candidate, &its_version)) return false;
    passed_over += (passed_over.empty() ? "" : ", ") + candidate.string() + " (" + ours_named(its_version) + ")";
    return true;
  });
  if (!found)
    return fail(found.error() +
                (passed_over.empty() ? "" : " but for programs of ours, not the Neuron compiler: " + passed_over));
  return fs::absolute(*found);
}

Result<fs::path> find_real_compiler() {
  if (auto named = util::env(kCompilerEnv); named && !named->empty()) {
    auto found = find_compiler_named(*named);
    if (!found)
      return fail(std::string(kCompilerEnv) + "=" + *named + ": " + found.error() + "; set " + kCompilerEnv +
                  " to the real neuronx-cc");
    return found;
  }
  auto found = find_compiler_named(kCompilerName);
  if (!found)
    return fail("the real neuronx-cc is needed: " + found.error() + "; install neuronx-cc on PATH after the "
                "masquerade directory, or name it with " + kCompilerEnv + "=PATH");
  return found;
}

std::string InputDigest::key_sha256() const {
  if (named.empty()) return sha256;
  util::Sha256 all;
  all.update("input " + sha256 + "\n");
  for (const auto& file : named) all.update("file " + file.sha256 + " " + file.path + "\n");
  return all.hex_digest();
}

Result<InputDigest> digest_input(const fs::path& input) {
  auto fd = util::open_input_file(input);
  if (!fd) return fail(fd.error());
  InputDigest digest;
  util::Sha256 hash;
  std::set<std::string> paths;
  std::string run; // a path-character run that may go on in the next chunk
  auto end_run = [&] {
    // A run may end in punctuation of its surroundings ("/a/b.py," or ".").
    while (!run.empty() && (run.back() == '.' || run.back() == ',' || run.back() == '=')) run.pop_back();
    if (looks_like_path(run)) paths.insert(run);
    run.clear();
  };
  std::string chunk(1 << 20, '\0');
  for (;;) {
    ssize_t n = ::read(fd->get(), chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(util::errno_text("cannot read", input, errno));
    if (n == 0) break;
    std::string_view bytes(chunk.data(), static_cast<std::size_t>(n));
    hash.update(bytes);
    digest.size += bytes.size();
    for (char ch : bytes) {
      const auto c = static_cast<unsigned char>(ch);
      if (!run.empty() && path_char(c)) {
        if (run.size() < 4096) run.push_back(ch);
      } else {
        if (!run.empty()) end_run();
        if (c == '/') run.push_back(ch);
      }
    }
  }
  if (!run.empty()) end_run();
  digest.sha256 = hash.hex_digest();
  for (const auto& path : paths) {
    if (!is_regular_file(path)) continue;
    if (same_file(path, input)) continue; // the input naming itself
    auto file = util::sha256_file(path);
    if (!file) continue; // unreadable: the compiler cannot read it either
    digest.named.push_back({path, file->sha256});
  }
  return digest;
}

} // namespace npc::compile
