// neuron_cc_wrapper: the compile entry a framework calls for every graph, and
// what the launcher's workers run to compile one pending entry.

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/eviction.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/secondary.hpp>
#include <npc/cache/usage_stats.hpp>
#include <npc/cli/as_neuronx_cc.hpp>
#include <npc/cli/cached_compile.hpp>
#include <npc/cli/common.hpp>
#include <npc/cli/neff_output.hpp>
#include <npc/cli/programs.hpp>
#include <npc/compile/compiler.hpp>
#include <npc/compile/entry_compile.hpp>
#include <npc/compile/cache_tiers.hpp>
#include <npc/compile/worker_report.hpp>
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

// Our messages: stdio, not iostreams, whose start (the locale and its
// facets) every cache hit paid. Each line is flushed, as std::endl did:
// torch-neuronx reads the compiler's output as it comes.
void print_text(std::FILE* stream, std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
}

void print_line(std::FILE* stream, const std::string& line) { print_text(stream, line + "\n"); }

// Where the build that can load libcurl is, relative to this program, when
// this is the static build (main/neuron_cc_wrapper_static.cpp); and our words.
const char* g_s3_build = nullptr;
char** g_argv = nullptr;

// S3 needs libcurl, which a static program cannot load. The static build,
// the one torch-neuronx starts for every graph, hands a command that needs
// S3 to the dynamic build of the same sources: same words, same
// environment, same process. Called before anything is locked, stored or
// written, so the dynamic build starts the command over; a hit in an S3
// cache's local mirror never gets here. Does nothing in the dynamic build.
void continue_in_s3_build() {
  if (g_s3_build == nullptr) return;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw EnvironmentError("cannot find this program's own path in /proc/self/exe: " + ec.message());
  std::string s3_build = (self.parent_path() / g_s3_build).lexically_normal().string();
  std::fflush(nullptr); // what stdio holds would be lost with this image
  g_argv[0] = s3_build.data();
  ::execv(s3_build.c_str(), g_argv);
  throw EnvironmentError("an s3:// cache needs " + s3_build + " (neuron_cc_wrapper built with S3 support), which " +
                         "cannot be run: " + std::strerror(errno) + "; reinstall neuron-parallel-compile");
}

struct CommonOptions {
  std::optional<std::string> compiler;
  std::optional<std::chrono::milliseconds> timeout;
  std::chrono::milliseconds lock_wait = compile::kDefaultLockWait;
  // Past this age a lock whose owner is not provably alive is stale; the
  // same --lock-timeout bounds the wait, so a waiter that gives up would
  // have found the lock stale by then anyway.
  std::chrono::seconds stale_lock_age = std::chrono::duration_cast<std::chrono::seconds>(storage::kDefaultStaleLockAge);
  std::optional<std::string> secondary_cache;
};

std::chrono::milliseconds parse_seconds(const std::string& option, const std::string& value) {
  auto timeout = util::parse_positive_seconds(value);
  if (!timeout)
    throw UsageError(option + " has the bad value '" + value + "': " + std::string(util::kPositiveSecondsExpected));
  return *timeout;
}

// Takes one of the options all commands share; false if the next word is not one.
bool take_common(util::ArgScanner& args, CommonOptions& common) {
  if (auto v = args.take_value("--compiler")) {
    common.compiler = *v;
    return true;
  }
  if (auto v = args.take_value("--timeout")) {
    common.timeout = parse_seconds("--timeout", *v);
    return true;
  }
  if (auto v = args.take_value("--lock-timeout")) {
    common.lock_wait = parse_seconds("--lock-timeout", *v);
    common.stale_lock_age = std::max(std::chrono::seconds(1),
                                     std::chrono::duration_cast<std::chrono::seconds>(common.lock_wait));
    return true;
  }
  if (auto v = args.take_value("--secondary-cache")) {
    common.secondary_cache = *v;
    return true;
  }
  return false;
}

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

void write_placeholder(const fs::path& output) {
  if (auto s = util::write_output_file(output, ""); !s) throw EnvironmentError("--output: " + s.error());
}

// The stdout line is torch-neuronx's own, which scripts look for; the error
// on stderr says what to do, where a failing exit status sends people.
int print_cached_failure(const cache::Entry& entry) {
  print_line(stdout, "Got a cached failed neff at " + entry.log_path().string() +
                         ". Will skip compilation, please set --retry_failed_compilation");
  spdlog::error("this graph failed to compile earlier and the failure is cached ({}); to compile it again, add "
                "--retry_failed_compilation to NEURON_CC_FLAGS or run neuron_cache clear-failed",
                entry.log_path().string());
  return static_cast<int>(ExitCode::failure);
}

int print_failure(const fs::path& entry_dir, const compile::EntryCompileResult& result) {
  spdlog::error("{}", compile::describe_failure(entry_dir, result.attempt.exit, result.log_path));
  return static_cast<int>(ExitCode::failure);
}

// A kill is reported like a failure but says it was not cached: the entry
// stays pending for the next run.
int print_killed(const fs::path& entry_dir, const compile::EntryCompileResult& result) {
  std::string how = result.attempt.exit;
  if (result.outcome == compile::EntryOutcome::killed) how += " (as the kernel's out-of-memory killer does)";
  how += "; not cached as a failure: the next run compiles it again";
  spdlog::error("{}", compile::describe_failure(entry_dir, how, result.log_path));
  return static_cast<int>(ExitCode::failure);
}

// Out of space: the entry stays pending; the message names the full place.
int print_no_space(const fs::path& entry_dir, const compile::EntryCompileResult& result) {
  spdlog::error("compilation of {} stopped: {}", entry_dir.string(), result.attempt.exit);
  return static_cast<int>(ExitCode::environment);
}

// The entry went while it compiled or while its lock was waited for
// (neuron_cache rm, --command clean, an eviction pass).
int print_removed(const fs::path& entry_dir) {
  spdlog::error("the cache entry {} was removed by another process before it was compiled here; nothing was "
                "cached (run again to compile it)", entry_dir.string());
  return static_cast<int>(ExitCode::environment);
}

int interrupted_status(const compile::EntryCompileResult& result) {
  return exit_status_for_signal(result.run ? result.run->interrupted_by : SIGINT);
}

// Where our messages go: stderr when the NEFF goes to our stdout
// (--output /dev/stdout), so that they do not end up inside it.
std::FILE* message_stream(const fs::path& output) {
  return util::same_file_as_stdout(output) ? stderr : stdout;
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

void print_cached_neff(const cache::Entry& entry, const fs::path& output) {
  print_line(message_stream(output),
             "Using a cached neff at " + entry.neff_path().string() + ". Exiting with a successfully compiled graph.");
}

// The read-only secondary cache: --secondary-cache, else the environment's.
std::optional<fs::path> secondary_root(const CommonOptions& common) {
  return common.secondary_cache ? cache::resolve_secondary_root(*common.secondary_cache)
                                : cache::secondary_root_from_environment();
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
  write_placeholder(command.output);
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
  cache::Cache cache(context.settings.cache_root);
  cache.set_stale_lock_age(command.common.stale_lock_age);
  if (auto s = cache.ensure_root(); !s) throw EnvironmentError(s.error());
  fs::path compiler = compile::locate_compiler(command.common.compiler);
  std::string version = compile::compiler_version(
      compiler, cache.private_dir() / cache::kCompilerVersionsDir);
  Keys keys = keys_for(command, context, graph_sha256, version);
  const cache::CacheKey& key = keys.key;
  const cache::Entry entry = cache.entry(key);
  const fs::path& entry_dir = entry.dir();
  // An S3 cache: `cache` is its local mirror, the shared tier behind it
  // opened only when needed (compile/cache_tiers.hpp).
  compile::CacheTiers tiers(cache, context.settings.shared_cache_url, compile::CacheTiers::Unusable::compile_here,
                            continue_in_s3_build);
  if (extract_only) return store_for_parallel_compile(command, context, cache, tiers, keys, graph);

  compile::EntryCompileOptions options{compiler, command.common.timeout, command.common.lock_wait,
                                       context.settings.cache.retry_failed_compilation,
                                       context.settings.cache.compile_workdir, context.settings.cache.dump_dir, {}, {}, {}, true};
  CachedCompile call{
      .cache = cache,
      .tiers = tiers,
      .key = key,
      .legacy_key = keys.legacy,
      .secondary_root = [&] { return secondary_root(command.common); },
      .lock_wait = command.common.lock_wait,
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
  auto end = compile_through_cache(call, options);
  if (end.served) {
    print_cached_neff(*end.served, command.output);
    return 0;
  }
  const compile::EntryCompileResult& result = end.result;
  switch (result.outcome) {
  case compile::EntryOutcome::cached_failure: return print_cached_failure(entry);
  case compile::EntryOutcome::interrupted: return interrupted_status(result);
  case compile::EntryOutcome::failed: return print_failure(entry_dir, result);
  case compile::EntryOutcome::killed:
  case compile::EntryOutcome::timed_out: return print_killed(entry_dir, result);
  case compile::EntryOutcome::no_space: return print_no_space(entry_dir, result);
  case compile::EntryOutcome::removed: return print_removed(entry_dir);
  case compile::EntryOutcome::compiled:
    print_line(message_stream(command.output),
               "Compiled " + entry_dir.string() + " in " + util::format_seconds(result.attempt.wall_seconds));
    return 0;
  case compile::EntryOutcome::already_done: print_cached_neff(entry, command.output); return 0;
  case compile::EntryOutcome::failed_in_run:   // compile-entry's alone (--run)
  case compile::EntryOutcome::locked_elsewhere: break; // we waited: never reached
  }
  throw EnvironmentError("the compile of " + entry_dir.string() + " came back without a result");
}

// compile-entry, telling its outcome through `report` (see worker_report.hpp).
int compile_entry_command(const std::vector<std::string>& words, std::optional<fs::path>& result_file,
                          compile::WorkerReport& report) {
  util::ArgScanner args(words);
  CommonOptions common;
  std::optional<fs::path> entry_dir;
  bool no_evict = false, no_wait = false;
  std::optional<std::string> shared_url;
  std::vector<std::string> cache_words;
  compile::EntryCompileOptions::RunMark run;
  while (!args.done()) {
    if (take_common(args, common)) continue;
    if (auto v = args.take_value("--result-file")) result_file = fs::path(*v);
    else if (auto r = args.take_value("--run")) run.run = *r;
    else if (auto by = args.take_value("--run-by")) run.by = *by;
    else if (args.take_flag("--last-attempt")) run.last_attempt = true;
    else if (auto url = args.take_value("--shared-cache")) shared_url = *url;
    else if (args.take_flag("--no-evict")) no_evict = true;
    else if (args.take_flag("--no-wait")) no_wait = true;
    else if (args.peek().starts_with("--")) cache_words.push_back(args.next());
    else if (!entry_dir) entry_dir = fs::path(args.next());
    else throw UsageError("compile-entry takes one entry directory, got a second: " + args.peek());
  }
  if (shared_url) continue_in_s3_build();
  // Whatever its place: --lock-timeout also sets the stale age, which the
  // launcher passes with --no-wait, and must not bring the wait back.
  if (no_wait) common.lock_wait = std::chrono::milliseconds(0);
  if (!entry_dir) throw UsageError("compile-entry needs the entry directory");
  auto from_command_line = config::split_cache_options(cache_words, "command line");
  if (!from_command_line.compiler_flags.empty())
    throw UsageError("compile-entry takes its compiler flags from the entry's compile_flags.json, not '" +
                     from_command_line.compiler_flags.front() + "'");
  Settings settings = load_settings(from_command_line.cache);
  auto key = cache::parse_key(entry_dir->string());
  if (!key) throw UsageError(entry_dir->string() + " is not a cache entry directory (.../neuronxcc-<version>/MODULE_<hash>+<hash>)");
  // The entry's own cache: the directory two levels up.
  fs::path dir = fs::absolute(*entry_dir).lexically_normal();
  cache::Cache cache(dir.parent_path().parent_path());
  cache.set_stale_lock_age(common.stale_lock_age);
  std::error_code ec;
  // With a shared tier the mirror may not have the entry yet: the launcher
  // leaves a graph only pending there for its compile to bring.
  if (!shared_url && !fs::is_directory(dir, ec)) {
    // The launcher queued it and someone removed it since: its report says
    // so, and the launcher counts it as removed, not as a failure.
    report.outcome = compile::EntryOutcome::removed;
    spdlog::error("no cache entry at {}", entry_dir->string());
    return static_cast<int>(ExitCode::usage);
  }
  compile::EntryCompileOptions options{compile::locate_compiler(common.compiler), common.timeout,
                                       common.lock_wait, settings.cache.retry_failed_compilation,
                                       settings.cache.compile_workdir, settings.cache.dump_dir, {}, {}, {}, true};
  if (!run.run.empty()) options.run = run;
  // The read-only secondary cache, if one is named, before compiling.
  if (fetch_from_secondary_cache(cache, secondary_root(common), *key, common.lock_wait)) {
    report.outcome = compile::EntryOutcome::already_done;
    print_line(stdout, "Already compiled: " + dir.string());
    return 0;
  }
  // A bad NEURON_PLATFORM_TARGET_OVERRIDE is reported before the entry is
  // locked (unreadable flags are compile_entry's to report).
  if (auto flags = cache::read_compile_flags(dir)) std::ignore = compile::target_for(*flags);
  // The mirror's entry of an S3 cache (what the launcher's workers compile
  // there): the shared entry's lock, result and upload too.
  compile::CacheTiers tiers(cache, shared_url, compile::CacheTiers::Unusable::fail);
  auto result = tiers.compile(*key, dir, options);
  report = compile::make_worker_report(result);
  switch (result.outcome) {
  case compile::EntryOutcome::cached_failure: return print_cached_failure(cache.entry(dir));
  case compile::EntryOutcome::failed_in_run:
    print_line(stderr, "Failed earlier in this run, not compiled again: " + dir.string() + " (" +
                           result.attempt.exit + "); log " + result.log_path.string());
    return exit_status(ExitCode::failure);
  case compile::EntryOutcome::interrupted: return interrupted_status(result);
  case compile::EntryOutcome::failed: return print_failure(dir, result);
  case compile::EntryOutcome::killed:
  case compile::EntryOutcome::timed_out: return print_killed(dir, result);
  case compile::EntryOutcome::no_space: return print_no_space(dir, result);
  case compile::EntryOutcome::removed: return print_removed(dir);
  case compile::EntryOutcome::already_done:
    print_line(stdout, "Already compiled: " + dir.string());
    return 0;
  case compile::EntryOutcome::locked_elsewhere:
    print_line(stdout, "Locked by another process: " + dir.string());
    return exit_status(ExitCode::locked_elsewhere);
  case compile::EntryOutcome::compiled: break;
  }
  print_line(stdout, "Compiled " + dir.string() + " in " + util::format_seconds(result.attempt.wall_seconds));
  if (!no_evict) cache::evict_after_write(cache, {settings.cache.size_limit(), settings.cache.ttl()});
  return 0;
}

int cmd_compile_entry(const std::vector<std::string>& words) {
  std::optional<fs::path> result_file;
  compile::WorkerReport report;
  auto tell = [&] {
    if (!result_file) return;
    if (auto s = compile::write_worker_report(*result_file, report); !s) spdlog::warn("--result-file: {}", s.error());
  };
  try {
    int status = compile_entry_command(words, result_file, report);
    tell();
    return status;
  } catch (const std::exception& e) {
    report.outcome.reset();
    report.error = e.what();
    tell();
    throw;
  }
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
int masquerade(const std::vector<std::string>& words) {
  static std::vector<std::string> s3_words;
  static std::vector<char*> s3_argv;
  s3_words = {g_argv[0], "as-neuronx-cc"};
  s3_words.insert(s3_words.end(), words.begin(), words.end());
  for (auto& word : s3_words) s3_argv.push_back(word.data());
  s3_argv.push_back(nullptr);
  g_argv = s3_argv.data();
  return as_neuronx_cc(words, continue_in_s3_build);
}

} // namespace

int neuron_cc_wrapper_main(int argc, char** argv, const char* s3_build) {
  g_s3_build = s3_build;
  g_argv = argv;
  return run_program("neuron_cc_wrapper", [&]() -> int {
    cache::set_lock_tool_name("neuron_cc_wrapper");
    // As the compiler, before any word is read as ours (--help, --version
    // are the compiler's then).
    if (argc > 0 && fs::path(argv[0]).filename() == compile::kCompilerName)
      return masquerade(std::vector<std::string>(argv + 1, argv + argc));
    if (argc > 1 && std::string_view(argv[1]) == "as-neuronx-cc")
      return masquerade(std::vector<std::string>(argv + 2, argv + argc));
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
