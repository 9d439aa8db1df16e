#pragma once
// What neuron_cc_wrapper's commands share: compile and key
// (cli/neuron_cc_wrapper.cpp) and compile-entry (cli/wrapper_compile_entry.cpp):
// the way they print, the options every command takes, the messages of a
// compile that did not end with a NEFF, and the hand-over of a command that
// needs S3 to the build that can load libcurl.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/cache/entry.hpp>
#include <npc/cli/cached_compile.hpp>
#include <npc/compile/entry_compile.hpp>
#include <npc/storage/lock.hpp>
#include <npc/util/arg_scanner.hpp>

namespace npc::cli {

namespace fs = std::filesystem;

// Our messages: stdio, not iostreams, whose start (the locale and its
// facets) every cache hit paid. Each line is flushed, as std::endl did:
// torch-neuronx reads the compiler's output as it comes.
void print_text(std::FILE* stream, std::string_view text);
void print_line(std::FILE* stream, const std::string& line);

// The program's words, and where the build that can load libcurl is,
// relative to this program, when this is the static build
// (main/neuron_cc_wrapper_static.cpp; null in the dynamic build).
void remember_program(char** argv, const char* s3_build);
// The words continue_in_s3_build starts the S3 build with, from now on.
void set_s3_build_words(char** argv);
// S3 needs libcurl, which a static program cannot load. The static build,
// the one torch-neuronx starts for every graph, hands a command that needs
// S3 to the dynamic build of the same sources: same words, same
// environment, same process. Called before anything is locked, stored or
// written, so the dynamic build starts the command over; a hit in an S3
// cache's local mirror never gets here. Does nothing in the dynamic build.
void continue_in_s3_build();

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

// Takes one of the options all commands share; false if the next word is not one.
bool take_common(util::ArgScanner& args, CommonOptions& common);

// The read-only secondary cache: --secondary-cache, else the environment's.
[[nodiscard]] std::optional<fs::path> secondary_root(const CommonOptions& common);

// How a compile that left no NEFF is told; each returns the exit status.
int print_cached_failure(const cache::Entry& entry);
int print_failure(const fs::path& entry_dir, const compile::EntryCompileResult& result);
int print_killed(const fs::path& entry_dir, const compile::EntryCompileResult& result);
int print_no_space(const fs::path& entry_dir, const compile::EntryCompileResult& result);
int print_removed(const fs::path& entry_dir);
[[nodiscard]] int interrupted_status(const compile::EntryCompileResult& result);

// Where our messages go: stderr when the NEFF goes to our stdout
// (--output /dev/stdout), so that they do not end up inside it.
[[nodiscard]] std::FILE* message_stream(const fs::path& output);
// "Using a cached neff at ...", torch-neuronx's own line for a hit.
void print_cached_neff(const cache::Entry& entry, const fs::path& output);
// How the compile entry's protocol (cli/cached_compile.hpp) ended, told as
// torch-neuronx's own compile entry tells it; the exit status.
int tell_end(const CachedCompileEnd& end, const cache::Entry& entry, const fs::path& output);

// `neuron_cc_wrapper compile-entry DIR ...` (cli/wrapper_compile_entry.cpp).
int cmd_compile_entry(const std::vector<std::string>& words);

} // namespace npc::cli
