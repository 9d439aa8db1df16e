#include <npc/cli/as_neuronx_cc.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/eviction.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/secondary.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/usage_stats.hpp>
#include <npc/cli/cached_compile.hpp>
#include <npc/cli/common.hpp>
#include <npc/cli/neff_output.hpp>
#include <npc/compile/cache_tiers.hpp>
#include <npc/compile/compiler.hpp>
#include <npc/compile/entry_compile.hpp>
#include <npc/compile/masquerade.hpp>
#include <npc/util/error.hpp>
#include <npc/util/exit_code.hpp>
#include <npc/util/input_file.hpp>
#include <npc/util/process.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/strings.hpp>

namespace npc::cli {

namespace {

// The real compiler in our place, with the words as given: its exit status,
// output and signals are the caller's without us in between.
[[noreturn]] void hand_over(const fs::path& real, const std::vector<std::string>& words) {
  std::vector<std::string> argv_words = {real.string()};
  argv_words.insert(argv_words.end(), words.begin(), words.end());
  std::vector<char*> argv;
  for (auto& word : argv_words) argv.push_back(word.data());
  argv.push_back(nullptr);
  ::setenv(compile::kMasqueradeActiveEnv, "1", 1);
  std::fflush(nullptr);
  ::execv(real.c_str(), argv.data());
  throw EnvironmentError("cannot run the real neuronx-cc " + real.string() + ": " + std::strerror(errno));
}

// The exit status a compile that ran gives the caller: the compiler's own.
int status_of(const compile::EntryCompileResult& result) {
  if (!result.run) return static_cast<int>(ExitCode::failure);
  const compile::CompileRun& run = *result.run;
  if (run.interrupted_by != 0) return exit_status_for_signal(run.interrupted_by);
  if (run.status.signaled) return exit_status_for_signal(run.status.signal);
  return run.status.code != 0 ? run.status.code : static_cast<int>(ExitCode::failure);
}

// Why a compile came back without a result it can stand by: the real
// compiler runs without the cache then.
class NotCached : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Adds to the cache's counters of the masquerade (cache/usage_stats.hpp).
void count_masquerade_usage(const Settings& settings, const cache::Cache& cache, const cache::UsageCounts& delta) {
  if (!settings.count_usage) return;
  if (auto s = cache::record_usage(cache.private_dir(), cache::kMasqueradeProgram, delta); !s)
    spdlog::debug("not counted: {}", s.error());
}

// The NEFF of a done entry to --output, verified; false when it fails its
// check. The output's fault is thrown as OutputFault (cli/neff_output.hpp).
bool serve(const cache::Entry& entry, const fs::path& output) {
  auto integrity = deliver_neff(entry, output);
  if (!integrity) throw NotCached("cannot read the cached NEFF of " + entry.dir().string() + ": " + integrity.error());
  if (*integrity == cache::Integrity::mismatch) return false;
  spdlog::debug("served {} from {}", output.string(), entry.dir().string());
  return true;
}

int compile_cached(const compile::RealCompilerCall& call, const fs::path& real, const Settings& settings,
                   const std::function<void()>& continue_in_s3_build) {
  auto digest = compile::digest_input(call.input);
  if (!digest) throw NotCached("cannot read the input: " + digest.error());
  for (const auto& named : digest->named) spdlog::debug("the input names {}: its bytes key the compile", named.path);
  cache::Tiers cache_tiers(settings);
  cache::Cache& cache = cache_tiers.directory();
  if (auto s = cache.ensure_root(); !s) throw NotCached(s.error());
  const std::string version =
      compile::compiler_version(real, cache.private_dir() / cache::kCompilerVersionsDir);
  const cache::CacheKey key = cache::make_key(digest->key_sha256(), call.key_flags, version);
  const cache::Entry entry = cache.entry(key);
  compile::CacheTiers tiers(cache_tiers, compile::CacheTiers::Unusable::compile_here,
                            continue_in_s3_build);
  compile::EntryCompileOptions options;
  options.compiler = real;
  options.retry_failed = true; // never a cached failure: the compiler decides
  options.cache_failures = false;
  options.flags_from = cache::FlagsOrigin::compiler_command_line; // explain compares it with such a line
  std::error_code ec;
  const fs::path caller_dir = fs::current_path(ec);
  options.adjust_job = [&](compile::CompileJob& job) {
    job.argv = compile::with_output(call, job.output_neff);
    job.argv.insert(job.argv.begin(), real.string());
    if (!ec) job.working_dir = caller_dir; // relative paths in the words are the caller's
    job.output_to_caller = true;
    job.environment = util::Environment::current();
    job.environment->set(compile::kMasqueradeActiveEnv, "1"); // see there
  };
  CachedCompile cached{
      .tiers = tiers,
      .lookup = {.key = key,
                 .legacy_key = std::nullopt,
                 // The read-only secondary cache, as the wrapper's compile reads it.
                 .secondary_root = [] { return cache::secondary_root_from_environment(); },
                 .lock_wait = compile::kDefaultLockWait},
      .eviction = {settings.cache.size_limit(), settings.cache.ttl()},
      .deliver = [&](const cache::Entry& done) { return serve(done, call.output); },
      .store_graph =
          [&] {
            auto bytes = util::read_input_file(call.input);
            if (!bytes) throw NotCached("cannot read the input: " + bytes.error());
            if (util::sha256_hex(*bytes) != digest->sha256) throw NotCached("the input changed while it was read");
            if (auto s = entry.store_graph(*bytes, call.key_flags); !s) throw NotCached(s.error());
          },
      .before_compile = {},
      .count = [&](const cache::UsageCounts& delta) { count_masquerade_usage(settings, cache, delta); },
  };
  auto end = compile_through_cache(cached, options);
  if (end.served) return 0;
  const compile::EntryCompileResult& result = end.result;
  switch (result.outcome) {
  case compile::EntryOutcome::compiled:
  case compile::EntryOutcome::already_done: return 0;
  case compile::EntryOutcome::failed:
  case compile::EntryOutcome::killed:
  case compile::EntryOutcome::timed_out:
  case compile::EntryOutcome::interrupted: return status_of(result);
  case compile::EntryOutcome::no_space: throw NotCached(result.attempt.exit);
  case compile::EntryOutcome::removed: throw NotCached(entry.dir().string() + " was removed by another process");
  case compile::EntryOutcome::cached_failure:
  case compile::EntryOutcome::failed_in_run: // the launcher's workers' alone
  case compile::EntryOutcome::locked_elsewhere: break;
  }
  throw NotCached("the compile of " + entry.dir().string() + " came back without a result");
}

} // namespace

int as_neuronx_cc(const std::vector<std::string>& words, const std::function<void()>& continue_in_s3_build) {
  if (util::env(compile::kMasqueradeActiveEnv) == "1")
    throw EnvironmentError("neuronx-cc was reached again through the real compiler's own lookup (a copy of "
                           "neuron_cc_wrapper further down PATH?): put the real neuronx-cc on PATH after the "
                           "masquerade directory, or name it with " + std::string(compile::kCompilerEnv) + "=PATH");
  auto real = compile::find_real_compiler();
  if (!real) throw EnvironmentError(real.error());
  std::string why;
  auto call = compile::parse_real_compiler_call(words, why);
  if (!call) {
    spdlog::debug("not cached ({}): running {}", why, real->string());
    hand_over(*real, words);
  }
  std::optional<Settings> settings;
  try {
    settings = load_settings({});
  } catch (const std::exception& e) {
    spdlog::warn("the cache settings cannot be read ({}); compiling without the cache", e.what());
    hand_over(*real, words);
  }
  if (settings->cache.no_cache) hand_over(*real, words);
  // The output first, before any look in the cache or compile: one that
  // cannot be written is refused now, as `neuron_cc_wrapper compile` refuses
  // it, rather than after a compile whose NEFF has nowhere to go.
  check_neff_output(call->output);
  try {
    return compile_cached(*call, *real, *settings, continue_in_s3_build);
  } catch (const OutputFault&) {
    throw; // no fallback: the real compiler cannot write there either
  } catch (const std::exception& e) {
    spdlog::warn("the cache cannot be used for this compile ({}); compiling without it", e.what());
  }
  hand_over(*real, words);
}

} // namespace npc::cli
