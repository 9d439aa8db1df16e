// neuron_cc_wrapper: the compile entry a framework calls for every graph
// (compile, over cli/cached_compile.hpp), the key of a graph, and the
// dispatch to compile-entry (cli/wrapper_compile_entry.cpp) and to the
// masquerade (cli/as_neuronx_cc.hpp).

#include <algorithm>
#include <cstdio>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/usage_stats.hpp>
#include <npc/cli/as_neuronx_cc.hpp>
#include <npc/cli/cached_compile.hpp>
#include <npc/cli/common.hpp>
#include <npc/cli/neff_output.hpp>
#include <npc/cli/programs.hpp>
#include <npc/cli/wrapper_common.hpp>
#include <npc/compile/compiler.hpp>
#include <npc/compile/entry_compile.hpp>
#include <npc/compile/cache_tiers.hpp>
#include <npc/compile/target.hpp>
#include <npc/util/arg_scanner.hpp>
#include <npc/util/bash_completion_flag.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/input_file.hpp>
#include <npc/util/output_file.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/strings.hpp>

namespace npc::cli {

namespace {

constexpr const char* kUsage = R"(usage:
  neuron_cc_wrapper compile --graph FILE --output NEFF [--cache-key MODULE_<g>+<f>] [options] [compiler flags...]
  neuron_cc_wrapper compile-entry DIR [options] [--retry_failed_compilation] [--no-evict] [--no-wait]
                                  [--result-file FILE] [--shared-cache URL]
                                  [--run NAME --run-by WHO [--last-attempt]]
  neuron_cc_wrapper key --graph FILE [--compiler PATH] [compiler flags...]

Serves a graph's NEFF from the Neuron persistent cache, or compiles it with
neuronx-cc and caches the result. NEURON_CC_FLAGS is honoured: its cache options
(--cache_dir, --no_cache, --cache_size, --cache_ttl, --retry_failed_compilation,
--log_level) configure the cache, every other word is a compiler flag; flags on
the command line come after those from the environment.

The entry is <cache>/neuronxcc-<compiler version>/MODULE_<graph hash>+<flags hash>,
as torch-neuronx names it: the graph hash is the first 20 hex digits of SHA-256
of the graph, the flags hash the first 8 of MD5 of the flags joined by single
spaces. An entry an earlier release of this tool compiled under its own flags
hash (SHA-256 of the length-prefixed flags) is still served; `key` prints both.

options:
  --cache-key NAME       compile: the entry's module name, MODULE_<graph hash>+<flags hash>
                         (lower-case hex or decimal digits), as the caller computed it
                         (NxD, optimum-neuron); used under neuronxcc-<compiler version>/
                         instead of a key of our own
  --compiler PATH        the compiler (default: $NEURON_CC, else neuronx-cc on PATH)
  --timeout SECONDS      kill a compile that runs longer (default: none)
  --lock-timeout SECONDS give up waiting for another process's compile of the
                         same graph after this long; a model.hlo_module.pb.lock
                         older than this whose owner is not provably alive is
                         stale and taken over (default: 21600)
  --secondary-cache DIR  a read-only cache to look in on a local miss (default:
                         $NEURON_COMPILE_CACHE_SECONDARY); a hit there is copied
                         into the local cache, verified, and served
  --result-file FILE     compile-entry: write how it ended to FILE as JSON (what the
                         parallel compile's workers tell it)
  --shared-cache URL     compile-entry: DIR is an entry of the local mirror of the
                         shared cache URL; it is compiled under the lock of the
                         entry there (or its result there downloaded) and pushed there
  --run NAME, --run-by WHO, --last-attempt
                         compile-entry: the compile is WHO's in a run of launchers
                         that work as one (the parallel compile's Slurm step tasks);
                         its attempt is recorded so (the last of WHO's with
                         --last-attempt), and a graph that failed that way in the
                         same run is not compiled again: exit 1
  --                     every word after it is a compiler flag

environment:
  NEURON_EXTRACT_GRAPHS_ONLY=1            store the graph for ahead-of-time
                                          compilation, compile nothing
  NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG  file to append each stored graph's path to
  NEURON_COMPILE_CACHE_SECONDARY          read-only secondary cache (see --secondary-cache)
  NEURON_COMPILE_CACHE_URL                the cache: a directory, or s3://bucket/prefix (its
                                          entries compiled in and served from a local mirror)
  NEURON_COMPILE_CACHE_MIRROR             the folder of S3 caches' mirrors, each at
                                          <folder>/s3/<bucket>/<prefix> (default:
                                          /var/tmp/neuron-compile-cache-mirror)
  NEURON_COMPILE_CACHE_STATS=0            count no hits, misses or time saved in the
                                          cache (neuron_cache stats shows them)
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_PROFILE,
  AWS_ENDPOINT_URL_S3                     who and where S3 is, for an s3:// cache
  NEURON_PLATFORM_TARGET_OVERRIDE         the compile target (trn1, trn1n, trn2, inf2) when
                                          the flags name no --target; default: this
                                          instance's (trn1 when it cannot be told)

exit codes: 0 success, 1 compile failed or a failure is cached, 2 usage or
configuration error, 3 cache or compiler unusable or --output not writable, 75
(compile-entry --no-wait) another process is compiling the entry, 128+N stopped
by signal N.

Reached as neuronx-cc (a link in the directory `neuron_cache masquerade-dir`
prints, put first on PATH), it takes the real compiler's command line, as
TorchNeuron and vLLM-Neuron give it, serves a hit from the cache and runs the
real neuronx-cc further down PATH ($NEURON_CC) on a miss, past every program of
ours there (a copy of this one too); its exit status is then the compiler's,
and 3 when there is no real compiler to run or --output cannot be written.
)";

// The completion script, written at build time by the generator of
// cli/neuron_cc_wrapper_completion.cpp from the commands and options of
// kUsage as a CLI::App (src/CMakeLists.txt): CLI11's objects are built at
// the start of every program that links them, and this one starts once per
// graph.
constexpr std::string_view kCompletionScript =
#include "neuron_cc_wrapper_completion.inc"
    ;

struct CompileCommand {
  CommonOptions common;
  fs::path graph;
  fs::path output;
  std::optional<std::string> cache_key; // a module name the caller computed
  std::vector<std::string> extra_words; // compiler flags and cache options
};

enum class Command { compile, key };

// The caller's module name becomes a directory name in the cache: checked.
cache::CacheKey cache_key_from(const std::string& module_name, const std::string& compiler_version) {
  auto key = cache::key_from_module_name(module_name, compiler_version);
  if (!key)
    throw UsageError("--cache-key has the bad value '" + module_name +
                     "': expected MODULE_<graph hash>+<flags hash>, each lower-case hex or decimal digits "
                     "(e.g. MODULE_9993940051196728623+3cc9a3cb)");
  return *key;
}

CompileCommand parse_compile(const std::vector<std::string>& words, Command which) {
  CompileCommand command;
  util::ArgScanner args(words);
  bool flags_only = false;
  while (!args.done()) {
    if (flags_only) {
      command.extra_words.push_back(args.next());
    } else if (args.take_flag("--")) {
      flags_only = true;
    } else if (auto v = args.take_value("--graph")) {
      command.graph = *v;
    } else if (auto v = args.take_value("--output")) {
      command.output = *v;
    } else if (auto v = args.take_value("--cache-key")) {
      if (which == Command::key)
        throw UsageError("key computes the key of a graph; --cache-key '" + *v + "' names one already: drop it");
      // Checked now, before anything is created.
      std::ignore = cache_key_from(*v, "any");
      command.cache_key = *v;
    } else if (!take_common(args, command.common)) {
      command.extra_words.push_back(args.next());
    }
  }
  if (command.graph.empty()) throw UsageError("--graph FILE is required");
  if (which == Command::compile && command.output.empty()) throw UsageError("--output NEFF is required");
  return command;
}

struct Context {
  Settings settings;
  std::vector<std::string> flags;
};

// NEURON_CC_FLAGS first, then the command line's words.
Context load_context(const std::vector<std::string>& command_line_words) {
  auto from_command_line = config::split_cache_options(command_line_words, "command line");
  Context context{load_settings(from_command_line.cache), {}};
  context.flags = context.settings.compiler_flags;
  context.flags.insert(context.flags.end(), from_command_line.compiler_flags.begin(),
                       from_command_line.compiler_flags.end());
  return context;
}

std::string read_graph(const fs::path& graph) {
  auto bytes = util::read_input_file(graph);
  if (!bytes) throw Error("cannot read the graph: " + bytes.error(), ExitCode::usage);
  return std::move(*bytes);
}

// The graph's digest, read in chunks: a cache hit never holds the whole graph
// (up to gigabytes) in memory, which costs more than hashing it.
util::FileDigest hash_graph(const fs::path& graph) {
  auto fd = util::open_input_file(graph);
  if (!fd) throw Error("cannot read the graph: " + fd.error(), ExitCode::usage);
  auto digest = util::sha256_fd(fd->get());
  if (!digest) throw Error("cannot read the graph " + graph.string() + ": " + digest.error(), ExitCode::usage);
  return std::move(*digest);
}

// The graph's bytes for storing, checked against the digest the key was made
// from: a graph rewritten in between must not be stored under the old key.
std::string read_graph_matching(const fs::path& graph, const std::string& sha256) {
  std::string bytes = read_graph(graph);
  if (util::sha256_hex(bytes) != sha256)
    throw Error("the graph " + graph.string() + " changed while it was being read; run the command again",
                ExitCode::usage);
  return bytes;
}

// Adds to the cache's counters of this program (cache/usage_stats.hpp),
// unless NEURON_COMPILE_CACHE_STATS says not to: a cache that cannot take
// them still serves and compiles.
void count_wrapper_usage(const Settings& settings, const cache::Cache& cache, const cache::UsageCounts& delta) {
  if (!settings.count_usage) return;
  if (auto s = cache::record_usage(cache.private_dir(), cache::kWrapperProgram, delta); !s)
    spdlog::debug("not counted: {}", s.error());
}

// A done entry's NEFF to the output; false when it fails the integrity
// check (the compile that follows checks again under the entry's lock:
// another process may have repaired it meanwhile, and says so when it
// recompiles).
bool deliver(const cache::Entry& entry, const fs::path& output) {
  auto integrity = deliver_neff(entry, output); // the output's fault is thrown: no compile
  if (!integrity) {
    spdlog::warn("cannot serve {}: {}; compiling instead", entry.dir().string(), integrity.error());
    return false;
  }
  return *integrity == cache::Integrity::ok;
}

int compile_without_cache(const CompileCommand& command, const Context& context) {
  // The compiler reads the graph: what would make us hang would make it hang.
  if (auto fd = util::open_input_file(command.graph); !fd)
    throw Error("cannot read the graph: " + fd.error(), ExitCode::usage);
  check_neff_output(command.output);
  fs::path compiler = compile::locate_compiler(command.common.compiler);
  fs::path out_dir = util::staging_dir_for_output(command.output);
  util::TempDir workdir(out_dir, std::string(util::kTempPrefix) + "work-");
  compile::CompileJob job{compiler,
                          fs::absolute(command.graph),
                          workdir.path() / "model.neff",
                          context.flags,
                          workdir.path(),
                          workdir.path() / "model.log",
                          command.common.timeout,
                          {},
                          false,
                          std::nullopt};
  auto run = compile::run_compiler(job);
  if (run.interrupted_by != 0) return exit_status_for_signal(run.interrupted_by);
  if (run.success() && fs::exists(job.output_neff)) {
    if (auto s = util::publish_output_from(job.output_neff, command.output); !s)
      throw EnvironmentError("--output: " + s.error());
    return 0;
  }
  // Beside the output; for a device or FIFO, in the staging directory.
  auto target = util::resolve_output(command.output);
  fs::path log = target && target->kind == util::OutputKind::replace
                     ? fs::path(target->path.string() + ".log")
                     : out_dir / ("neuron_cc_wrapper." + std::to_string(::getpid()) + ".log");
  std::error_code ec;
  fs::rename(job.log_file, log, ec);
  spdlog::error("{}", compile::describe_failure(command.graph, run.describe(), log));
  return static_cast<int>(ExitCode::failure);
}

// Where the compile's result lives: the caller's module name, or our key of
// the graph and flags; with our key, also where an earlier release of this
// tool stored the same graph and flags (read only).
struct Keys {
  cache::CacheKey key;
  std::optional<cache::CacheKey> legacy;
};

Keys keys_for(const CompileCommand& command, const Context& context, const std::string& graph_sha256,
              const std::string& version) {
  if (command.cache_key) return {cache_key_from(*command.cache_key, version), std::nullopt};
  return {cache::make_key(graph_sha256, context.flags, version),
          cache::legacy_key(graph_sha256, context.flags, version)};
}

// The entry under the legacy key when it is done (and ours is not): serving
// it spares recompiling every graph an earlier release compiled.
std::optional<cache::Entry> done_legacy_entry(const cache::Cache& cache, const Keys& keys) {
  if (!keys.legacy || *keys.legacy == keys.key) return std::nullopt;
  cache::Entry legacy = cache.entry(*keys.legacy);
  if (!legacy.looks_done()) return std::nullopt;
  return legacy;
}

// Extraction (NEURON_EXTRACT_GRAPHS_ONLY=1): the graph stored as a pending
// entry for the parallel compile, its path logged, a placeholder NEFF at
// the output; nothing compiled.
int store_for_parallel_compile(const CompileCommand& command, const Context& context, const cache::Cache& cache,
                               compile::CacheTiers& tiers, const Keys& keys, const std::string& graph) {
  // The graph goes where the framework's would: the shared tier when there
  // is one, as users name it there (its URL).
  std::string stored;
  if (auto graph_url = tiers.store_shared_graph(keys.key, graph, context.flags)) {
    stored = *graph_url;
  } else {
    const cache::Entry entry = cache.entry(keys.key);
    // Compiled by an earlier release: name that entry (the launcher finds it
    // done) rather than store a pending one that would be compiled again.
    auto legacy = entry.looks_done() ? std::nullopt : done_legacy_entry(cache, keys);
    if (legacy) {
      stored = legacy->graph_path().string();
    } else if (auto s = entry.store_graph(graph, context.flags); !s) {
      throw EnvironmentError(s.error());
    } else {
      stored = entry.graph_path().string();
    }
  }
  print_line(stdout, "Extracting graphs (" + stored + ") for ahead-of-time parallel compilation. No compilation was done.");
  if (auto log = util::env("NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG"); log && !log->empty())
    if (auto s = util::append_line(*log, stored); !s) throw EnvironmentError(s.error());
  // An empty NEFF at the output: the framework goes on to its next graph.
  if (auto s = util::write_output_file(command.output, ""); !s) throw EnvironmentError("--output: " + s.error());
  return 0;
}

int cmd_compile(const std::vector<std::string>& words) {
  CompileCommand command = parse_compile(words, Command::compile);
  Context context = load_context(command.extra_words);
  bool extract_only = util::env_flag("NEURON_EXTRACT_GRAPHS_ONLY");
  if (context.settings.cache.no_cache) {
    // The original's wrapper options: --no_cache is ignored with a warning
    // when graphs are extracted for a parallel compile (they go to the cache).
    if (extract_only)
      spdlog::warn("NEURON_CC_FLAGS has --no_cache; ignored while extracting graphs for the parallel compile");
    else
      return compile_without_cache(command, context);
  }
  // Extraction stores every graph, so it reads it whole; otherwise only a
  // miss needs the bytes. A caller's key needs no digest at all.
  std::string graph;
  std::string graph_sha256;
  if (extract_only) {
    graph = read_graph(command.graph);
    if (!command.cache_key) graph_sha256 = util::sha256_hex(graph);
  } else if (!command.cache_key) {
    graph_sha256 = hash_graph(command.graph).sha256;
  }
  cache::Tiers cache_tiers(context.settings);
  cache::Cache& cache = cache_tiers.directory();
  cache.set_stale_lock_age(command.common.stale_lock_age);
  if (auto s = cache.ensure_root(); !s) throw EnvironmentError(s.error());
  fs::path compiler = compile::locate_compiler(command.common.compiler);
  std::string version = compile::compiler_version(
      compiler, cache.private_dir() / cache::kCompilerVersionsDir);
  Keys keys = keys_for(command, context, graph_sha256, version);
  const cache::CacheKey& key = keys.key;
  const cache::Entry entry = cache.entry(key);
  // An S3 cache: `cache` is its local mirror, the shared tier behind it
  // opened only when needed (compile/cache_tiers.hpp).
  compile::CacheTiers tiers(cache_tiers, compile::CacheTiers::Unusable::compile_here,
                            continue_in_s3_build);
  if (extract_only) return store_for_parallel_compile(command, context, cache, tiers, keys, graph);

  compile::EntryCompileOptions options{compiler, command.common.timeout, command.common.lock_wait,
                                       context.settings.cache.retry_failed_compilation,
                                       context.settings.cache.compile_workdir, context.settings.cache.dump_dir, {}, {}, {}, true};
  CachedCompile call{
      .tiers = tiers,
      .lookup = {.key = key,
                 .legacy_key = keys.legacy,
                 .secondary_root = [&] { return secondary_root(command.common); },
                 .lock_wait = command.common.lock_wait},
      .eviction = {context.settings.cache.size_limit(), context.settings.cache.ttl()},
      .deliver = [&](const cache::Entry& done) { return deliver(done, command.output); },
      .store_graph =
          [&] {
            std::string bytes = command.cache_key ? read_graph(command.graph)
                                                  : read_graph_matching(command.graph, graph_sha256);
            if (auto s = entry.store_graph(bytes, context.flags); !s) throw EnvironmentError(s.error());
          },
      // A bad NEURON_PLATFORM_TARGET_OVERRIDE, or an output that cannot be
      // written, is reported before anything is stored or locked.
      .before_compile =
          [&] {
            std::ignore = compile::target_for(context.flags);
            check_neff_output(command.output);
          },
      .count = [&](const cache::UsageCounts& delta) { count_wrapper_usage(context.settings, cache, delta); },
  };
  return tell_end(compile_through_cache(call, options), entry, command.output);
}

int cmd_key(const std::vector<std::string>& words) {
  CompileCommand command = parse_compile(words, Command::key);
  Context context = load_context(command.extra_words);
  util::FileDigest graph = hash_graph(command.graph);
  cache::Cache cache(context.settings.cache_root);
  fs::path compiler = compile::locate_compiler(command.common.compiler);
  std::error_code ec;
  fs::path memo = fs::is_directory(cache.private_dir(), ec)
                      ? cache.private_dir() / cache::kCompilerVersionsDir
                      : fs::path();
  std::string version = compile::compiler_version(compiler, memo);
  cache::KeyInputs inputs;
  cache::CacheKey key = cache::make_key(graph.sha256, context.flags, version, &inputs);
  inputs.graph_bytes = graph.size;
  print_text(stdout, cache.entry_dir(key).string() + "\n" + cache::explain_key(inputs, key) + "legacy entry path: " +
                         cache.entry_dir(cache::legacy_key(graph.sha256, context.flags, version)).string() + "\n");
  return 0;
}

// Reached as `neuronx-cc` (a link in the masquerade directory): the words
// the S3 build gets start with as-neuronx-cc, since its own name is not
// neuronx-cc.
int masquerade(const char* program, const std::vector<std::string>& words) {
  static std::vector<std::string> s3_words;
  static std::vector<char*> s3_argv;
  s3_words = {program, "as-neuronx-cc"};
  s3_words.insert(s3_words.end(), words.begin(), words.end());
  for (auto& word : s3_words) s3_argv.push_back(word.data());
  s3_argv.push_back(nullptr);
  set_s3_build_words(s3_argv.data());
  return as_neuronx_cc(words, continue_in_s3_build);
}

} // namespace

int neuron_cc_wrapper_main(int argc, char** argv, const char* s3_build) {
  remember_program(argv, s3_build);
  return run_program("neuron_cc_wrapper", [&]() -> int {
    cache::set_lock_tool_name("neuron_cc_wrapper");
    // As the compiler, before any word is read as ours (--help, --version
    // are the compiler's then).
    if (argc > 0 && fs::path(argv[0]).filename() == compile::kCompilerName)
      return masquerade(argv[0], std::vector<std::string>(argv + 1, argv + argc));
    if (argc > 1 && std::string_view(argv[1]) == "as-neuronx-cc")
      return masquerade(argv[0], std::vector<std::string>(argv + 2, argv + argc));
    if (argc == 2 && argv[1] == util::kPrintBashCompletion) {
      print_text(stdout, kCompletionScript);
      return 0;
    }
    std::vector<std::string> words(argv + 1, argv + argc);
    if (words.empty()) throw UsageError("a command is required: compile, compile-entry or key (see --help)");
    std::string command = words.front();
    words.erase(words.begin());
    // `neuron_cc_wrapper compile --help` asks for help too: never a compiler
    // flag to pass on (the compiler would print its own help, not compile).
    auto asks_for_help = [](const std::string& word) { return word == "--help" || word == "-h"; };
    if (asks_for_help(command) || std::any_of(words.begin(), words.end(), asks_for_help)) {
      print_text(stdout, kUsage);
      return 0;
    }
    if (command == "--version") {
      print_text(stdout, "neuron_cc_wrapper " NPC_VERSION "\n");
      return 0;
    }
    if (command == "compile") return cmd_compile(words);
    if (command == "compile-entry") return cmd_compile_entry(words);
    if (command == "key") return cmd_key(words);
    throw UsageError("unknown command '" + command + "': expected compile, compile-entry or key (see --help)");
  });
}

} // namespace npc::cli
