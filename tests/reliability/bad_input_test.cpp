// Bad input: one test per row of docs/bad-inputs.md. Each runs a program on
// one bad input and asserts the exit code and the message, exactly (an error
// must be a single line on stderr) or, where a path the test cannot know in
// advance is part of it, by the distinctive part.
//
// NPC_BAD_INPUTS_DOC=FILE appends each row as observed, as a Markdown table
// row: how docs/bad-inputs.md is regenerated
// (tests/reliability/bad_inputs_doc.sh).

#include <sys/stat.h>

#include <cstdio>

#include <algorithm>
#include <functional>

#include <gtest/gtest.h>

#include <npc/util/fs.hpp>
#include <npc/util/json_text.hpp>
#include <npc/util/shell_words.hpp>
#include <npc/util/strings.hpp>
#include <npc/util/utf8.hpp>

#include "reliability.hpp"

namespace npc::reltest {
namespace {

using npc::test::RunResult;

// Where in the output the message is, and how it must match.
enum class Match {
  only_line,   // stderr is exactly this one line
  stderr_line, // one of stderr's lines is exactly this
  stdout_line, // one of stdout's lines is exactly this
  stdout_prefix, // one of stdout's lines starts with this (a duration follows)
  stderr_prefix // one of stderr's lines starts with this (the rest holds $PATH)
};

struct Context {
  fs::path dir, cache, entry, graph;
  std::function<RunResult(std::vector<std::string>, std::map<std::string, std::string>)> run_tool;
};

using Setup = void (*)(Context&);

struct BadInput {
  const char* name;
  const char* input;     // what is wrong, for the table
  const char* program;   // neuron_cc_wrapper, neuron_parallel_compile, neuron_cache
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  Setup setup;
  int exit_code;
  Match match;
  const char* message; // with the placeholders <D> <C> <E> <G> <V>
};

void nothing(Context&) {}

void extract(Context& c) {
  auto r = c.run_tool({"compile", "--graph", c.graph.string(), "--output", (c.dir / "placeholder").string()},
                      {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
}

void compile_done(Context& c) {
  auto r = c.run_tool({"compile", "--graph", c.graph.string(), "--output", (c.dir / "first.neff").string()}, {});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
}

void write(const fs::path& p, const std::string& text) { npc::test::write_text(p, text); }

// The usage counters' folder and one of its shards (cache/usage_stats.hpp),
// after a compile counted in the folder: emptied, so that which shard the
// compile counted in does not matter.
fs::path counters_dir(const Context& c) { return c.cache / ".npc" / "stats"; }
fs::path counters_shard(const Context& c, int i) { return counters_dir(c) / (std::to_string(i) + ".json"); }
void compile_done_counters_emptied(Context& c) {
  compile_done(c);
  fs::remove_all(counters_dir(c));
  fs::create_directories(counters_dir(c));
}

// A FIFO nobody writes to: opening it for reading would wait forever (the
// run's timeout ends such a run, failed).
void make_fifo(const fs::path& p) { ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0) << p; }

// <D>/full: a symlink to /dev/full, a device every write to fails with
// ENOSPC. Through a link of ours, a product that renamed over its output
// would replace the link, never the machine's /dev/full.
void link_full_device(Context& c) { fs::create_symlink("/dev/full", c.dir / "full"); }

const std::string kVersion = npc::test::kStandinVersion;

// The table. Placeholders: <D> the test's directory, <C> the cache root
// (<D>/c: --cache_dir names the root), <E> the entry of the sample graph, <G> the
// sample graph, <V> the stand-in compiler's version.
const std::vector<BadInput>& rows() {
  static const std::vector<BadInput> table = {
      // ---- NEURON_CC_FLAGS ----
      {"FlagsUnbalancedSingleQuote", "`NEURON_CC_FLAGS` with an unbalanced single quote", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC_FLAGS", "-O2 --cache_dir='<D>/c"}},
       nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: NEURON_CC_FLAGS: unbalanced single quote at position 17"},
      {"FlagsUnbalancedDoubleQuote", "`NEURON_CC_FLAGS` with an unbalanced double quote", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC_FLAGS", "--model-type=\"transformer"}},
       nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: NEURON_CC_FLAGS: unbalanced double quote at position 14"},
      {"FlagsWithOutput", "`NEURON_CC_FLAGS` naming the compiler's `--output`", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC_FLAGS", "-O2 --output=/tmp/x.neff"}},
       nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: NEURON_CC_FLAGS: --output is chosen for each compile by this tool; remove "
       "'--output=/tmp/x.neff' from the compiler flags"},
      {"CacheUrlBadPercentEscape", "`NEURON_COMPILE_CACHE_URL=file:///x%zz`", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC_FLAGS", ""}, {"NEURON_COMPILE_CACHE_URL", "file:///x%zz"}},
       nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: NEURON_COMPILE_CACHE_URL: 'file:///x%zz': '%zz' at position 3 is not a percent "
       "escape of a byte (write a space as %20 and a % as %25)"},
      {"FlagsTrailingBackslash", "`NEURON_CC_FLAGS` ending in a backslash", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC_FLAGS", "-O2 \\"}}, nothing, 2,
       Match::only_line, "neuron_cc_wrapper: error: NEURON_CC_FLAGS: trailing backslash at position 5"},
      {"FlagsBadCacheSize", "`--cache_size=lots`", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC_FLAGS", "--cache_size=lots"}}, nothing, 2,
       Match::only_line,
       "neuron_cc_wrapper: error: NEURON_CC_FLAGS: --cache_size has the bad value 'lots': expected a size in bytes "
       "such as 100000000000 or 100GB"},
      {"FlagsFractionalCacheSize", "`--cache_size=1.5` (bytes are whole)", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC_FLAGS", "--cache_size=1.5"}}, nothing, 2,
       Match::only_line,
       "neuron_cc_wrapper: error: NEURON_CC_FLAGS: --cache_size has the bad value '1.5': expected a size in bytes "
       "such as 100000000000 or 100GB"},
      {"FlagsNegativeTtl", "`--cache_ttl=-1`", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC_FLAGS", "--cache_ttl=-1"}}, nothing, 2,
       Match::only_line,
       "neuron_cc_wrapper: error: NEURON_CC_FLAGS: --cache_ttl has the bad value '-1': expected a non-negative "
       "number of days such as 30"},
      {"FlagsBadLogLevel", "`--log_level=LOUD`", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC_FLAGS", "--log_level=LOUD"}}, nothing, 2,
       Match::only_line,
       "neuron_cc_wrapper: error: NEURON_CC_FLAGS: --log_level has the bad value 'LOUD': expected one of DEBUG, "
       "INFO, WARNING, ERROR"},
      {"FlagsSwitchWithValue", "`--no_cache=1` (a switch given a value)", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC_FLAGS", "--no_cache=1"}}, nothing, 2,
       Match::only_line, "neuron_cc_wrapper: error: NEURON_CC_FLAGS: --no_cache takes no value, but was given '1'"},
      {"FlagsRetrySwitchWithValue", "`--retry_failed_compilation=yes`", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"},
       {{"NEURON_CC_FLAGS", "--retry_failed_compilation=yes"}}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: NEURON_CC_FLAGS: --retry_failed_compilation takes no value, but was given 'yes'"},
      {"FlagsCacheDirWithoutValue", "`--cache_dir` as the last word", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC_FLAGS", "-O2 --cache_dir"}}, nothing, 2,
       Match::only_line,
       "neuron_cc_wrapper: error: NEURON_CC_FLAGS: --cache_dir is missing its value (write --cache_dir=VALUE)"},
      // Flags are bytes: stored losslessly (compile_flags.json has \udcff), never a JSON exception.
      {"FlagNotUtf8", "a byte 0xff in a compiler flag (stored as `\\udcff`)", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"},
       {{"NEURON_CC_FLAGS", "--cache_dir=<D>/c --pipeline=\xff"}}, nothing, 0, Match::stdout_prefix,
       "Compiled <C>/neuronxcc-<V>/MODULE_"},
      {"FlagsCacheDirEmpty", "`--cache_dir=` (empty)", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC_FLAGS", "--cache_dir="}}, nothing, 2,
       Match::only_line,
       "neuron_cc_wrapper: error: NEURON_CC_FLAGS: --cache_dir has the bad value '': expected a directory path"},
      {"CacheUrlRemoteScheme", "`NEURON_COMPILE_CACHE_URL=gs://bucket/cache`", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"},
       {{"NEURON_CC_FLAGS", ""}, {"NEURON_COMPILE_CACHE_URL", "gs://bucket/cache"}}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: NEURON_COMPILE_CACHE_URL: the scheme 'gs://' of 'gs://bucket/cache' is not "
       "supported; use a local or mounted directory path, or s3://bucket/prefix"},
      {"CacheUrlS3WithoutBucket", "`NEURON_COMPILE_CACHE_URL=s3:///cache` (no bucket)", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"},
       {{"NEURON_CC_FLAGS", ""}, {"NEURON_COMPILE_CACHE_URL", "s3:///cache"}}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: NEURON_COMPILE_CACHE_URL: 's3:///cache' names no bucket (write s3://bucket or "
       "s3://bucket/prefix)"},
      {"CacheUrlRelativeFile", "`NEURON_COMPILE_CACHE_URL=file://relative/dir`", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"},
       {{"NEURON_CC_FLAGS", ""}, {"NEURON_COMPILE_CACHE_URL", "file://relative/dir"}}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: NEURON_COMPILE_CACHE_URL: 'file://relative/dir' is not an absolute file:// URL "
       "(write file:///path/to/cache)"},
      {"ExtractWithNoCache", "`NEURON_EXTRACT_GRAPHS_ONLY=1` with `--no_cache`", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"},
       {{"NEURON_CC_FLAGS", "--no_cache"}, {"NEURON_EXTRACT_GRAPHS_ONLY", "1"}}, nothing, 0, Match::stderr_line,
       "neuron_cc_wrapper: warning: NEURON_CC_FLAGS has --no_cache; ignored while extracting graphs for the parallel "
       "compile"},
      // ---- the compile entry's command line ----
      {"WrapperNoCommand", "`neuron_cc_wrapper` with no command", "neuron_cc_wrapper", {}, {}, nothing, 2,
       Match::only_line, "neuron_cc_wrapper: error: a command is required: compile, compile-entry or key (see --help)"},
      {"WrapperUnknownCommand", "an unknown command", "neuron_cc_wrapper", {"frobnicate"}, {}, nothing, 2,
       Match::only_line,
       "neuron_cc_wrapper: error: unknown command 'frobnicate': expected compile, compile-entry or key (see --help)"},
      {"WrapperNoGraph", "`compile` without `--graph`", "neuron_cc_wrapper", {"compile", "--output", "<D>/o.neff"}, {},
       nothing, 2, Match::only_line, "neuron_cc_wrapper: error: --graph FILE is required"},
      {"WrapperNoOutput", "`compile` without `--output`", "neuron_cc_wrapper", {"compile", "--graph", "<G>"}, {},
       nothing, 2, Match::only_line, "neuron_cc_wrapper: error: --output NEFF is required"},
      {"WrapperGraphMissing", "a graph file that does not exist", "neuron_cc_wrapper",
       {"compile", "--graph", "<D>/nope.hlo", "--output", "<D>/o.neff"}, {}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: cannot read the graph: cannot open <D>/nope.hlo: No such file or directory"},
      {"WrapperGraphIsADirectory", "a graph path that is a directory", "neuron_cc_wrapper",
       {"compile", "--graph", "<D>", "--output", "<D>/o.neff"}, {}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: cannot read the graph: <D> is a directory, not a regular file"},
      {"WrapperTimeoutNotANumber", "`--timeout abc`", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff", "--timeout", "abc"}, {}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: --timeout has the bad value 'abc': expected a positive number of seconds"},
      {"WrapperTimeoutZero", "`--timeout 0`", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff", "--timeout", "0"}, {}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: --timeout has the bad value '0': expected a positive number of seconds"},
      {"WrapperLockTimeoutNegative", "`--lock-timeout -5`", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff", "--lock-timeout", "-5"}, {}, nothing, 2,
       Match::only_line,
       "neuron_cc_wrapper: error: --lock-timeout has the bad value '-5': expected a positive number of seconds"},
      {"WrapperTimeoutWithoutValue", "`--timeout` as the last word", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff", "--timeout"}, {}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: --timeout is missing its value"},
      // ---- the compiler ----
      {"CompilerDoesNotExist", "`NEURON_CC` naming a file that does not exist", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC", "/nonexistent/neuronx-cc"}}, nothing,
       3, Match::only_line,
       "neuron_cc_wrapper: error: NEURON_CC=/nonexistent/neuronx-cc: /nonexistent/neuronx-cc is not an executable "
       "file; set NEURON_CC to the real neuronx-cc, or unset it to use neuronx-cc on PATH"},
      {"CompilerNotExecutable", "`NEURON_CC` naming a file without the execute bit", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC", "<D>/cc.txt"}},
       [](Context& c) { write(c.dir / "cc.txt", "not a program\n"); }, 3, Match::only_line,
       "neuron_cc_wrapper: error: NEURON_CC=<D>/cc.txt: <D>/cc.txt is not an executable file; set NEURON_CC to the "
       "real neuronx-cc, or unset it to use neuronx-cc on PATH"},
      {"CompilerIsADirectory", "`--compiler` naming a directory", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff", "--compiler", "<D>"}, {}, nothing, 3, Match::only_line,
       "neuron_cc_wrapper: error: --compiler <D>: <D> is not an executable file; name the real neuronx-cc with "
       "--compiler PATH"},
      {"CompilerIsNotACompiler", "`--compiler /bin/false` (no version)", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff", "--compiler", "/bin/false"}, {}, nothing, 3,
       Match::only_line,
       "neuron_cc_wrapper: error: cannot learn the version of the compiler /bin/false: `--version` ended with exit "
       "code 1 (point at a working neuronx-cc with --compiler or NEURON_CC)"},
      {"CompilerNotFound", "no `--compiler`, no `NEURON_CC`, no `neuronx-cc` on `PATH`", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC", ""}, {"PATH", "/nonexistent-bin"}},
       nothing, 3, Match::only_line,
       "neuron_cc_wrapper: error: the Neuron compiler was not found: no --compiler, no NEURON_CC, and neuronx-cc "
       "was not found on PATH (/nonexistent-bin); install neuronx-cc or point at it with --compiler PATH or "
       "NEURON_CC=PATH"},
      // ---- the cache directory ----
      {"CacheDirIsAFile", "`--cache_dir` naming a regular file", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC_FLAGS", "--cache_dir=<D>/file"}},
       [](Context& c) { write(c.dir / "file", "x"); }, 3, Match::only_line,
       "neuron_cc_wrapper: error: the cache path <D>/file exists and is not a directory"},
      {"CacheRootIsAFile", "the cache root (`--cache_dir`'s directory) is a regular file", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {},
       [](Context& c) { write(c.cache, "x"); }, 3, Match::only_line,
       "neuron_cc_wrapper: error: the cache path <C> exists and is not a directory"},
      {"CacheDirCannotBeCreated", "`--cache_dir` where no directory can be made (`/proc/...`)", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {{"NEURON_CC_FLAGS", "--cache_dir=/proc/npc-cache"}},
       nothing, 3, Match::only_line,
       "neuron_cc_wrapper: error: cannot create the cache directory /proc/npc-cache: No such file or directory (set "
       "--cache_dir in NEURON_CC_FLAGS to a writable place)"},
      {"EntryDirIsAFile", "the entry directory `MODULE_<g>+<f>` is a regular file", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {},
       [](Context& c) { write(c.entry, "x"); }, 3, Match::only_line,
       "neuron_cc_wrapper: error: cannot use <E> as a directory: it exists and is not one"},
      {"CacheListPathNotUtf8", "`neuron_cache --json ls` over a cache whose path has a byte 0xff", "neuron_cache",
       {"--cache_dir", "<D>/c\xff", "--json", "ls"}, {},
       [](Context& c) {
         auto r = c.run_tool({"compile", "--graph", c.graph.string(), "--output", (c.dir / "o.neff").string()},
                             {{"NEURON_CC_FLAGS", "--cache_dir=" + c.dir.string() + "/c\xff"}});
         ASSERT_EQ(r.exit_code, 0) << r.describe();
       },
       0, Match::stdout_line, "  \"cache_root\": \"<D>/c\\udcff\","},
      // ---- files inside an entry ----
      {"CompileFlagsNotJson", "`compile_flags.json` that is not JSON", "neuron_cc_wrapper",
       {"compile-entry", "<E>"}, {},
       [](Context& c) {
         extract(c);
         write(c.entry / "compile_flags.json", "--target trn1\n");
       },
       3, Match::only_line,
       "neuron_cc_wrapper: error: <E>/compile_flags.json is corrupt: not valid JSON (remove the entry with "
       "neuron_cache rm)"},
      {"CompileFlagsNotAnArray", "`compile_flags.json` that is a JSON object", "neuron_cc_wrapper",
       {"compile-entry", "<E>"}, {},
       [](Context& c) {
         extract(c);
         write(c.entry / "compile_flags.json", "{\"flags\": [\"-O2\"]}\n");
       },
       3, Match::only_line,
       "neuron_cc_wrapper: error: <E>/compile_flags.json is corrupt: not a JSON array of strings (remove the entry "
       "with neuron_cache rm)"},
      {"CompileFlagsNumbers", "`compile_flags.json` holding numbers", "neuron_cc_wrapper", {"compile-entry", "<E>"},
       {},
       [](Context& c) {
         extract(c);
         write(c.entry / "compile_flags.json", "[1, 2]\n");
       },
       3, Match::only_line,
       "neuron_cc_wrapper: error: <E>/compile_flags.json is corrupt: not a JSON array of strings (remove the entry "
       "with neuron_cache rm)"},
      {"EntryWithoutGraph", "an entry with no `model.hlo_module.pb`", "neuron_cc_wrapper", {"compile-entry", "<E>"},
       {},
       [](Context& c) {
         extract(c);
         fs::remove(c.entry / "model.hlo_module.pb");
       },
       3, Match::only_line,
       "neuron_cc_wrapper: error: cache entry <E> has no model.hlo_module.pb to compile (remove it with neuron_cache "
       "rm)"},
      {"TruncatedNeffServed", "a done entry whose `model.neff` was truncated: recompiled, not served",
       "neuron_cc_wrapper", {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {},
       [](Context& c) {
         compile_done(c);
         fs::resize_file(c.entry / "model.neff", fs::file_size(c.entry / "model.neff") / 2);
       },
       0, Match::stderr_line,
       "neuron_cc_wrapper: warning: <E>: the cached NEFF does not match its integrity record; compiling it again"},
      {"TruncatedNeffVerify", "`neuron_cache verify` on a truncated `model.neff`", "neuron_cache", {"verify"}, {},
       [](Context& c) {
         compile_done(c);
         fs::resize_file(c.entry / "model.neff", 100);
       },
       1, Match::stdout_line, "BAD neuronxcc-<V>/<M>: NEFF does not match its integrity record"},
      {"NeffPlaceIsAFolder", "a folder where a pending entry's `model.neff` belongs", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {},
       [](Context& c) {
         extract(c);
         fs::create_directories(c.entry / "model.neff");
         write(c.entry / "model.neff" / "x", "x");
       },
       3, Match::only_line,
       "neuron_cc_wrapper: error: cannot publish <E>/model.neff: Is a directory (if the entry is damaged, "
       "`neuron_cache --cache_dir <C> rm neuronxcc-<V>/<M>` removes it and the next run compiles the graph again)"},
      {"AlteredNeffServed", "a done entry whose `model.neff` had a byte changed: recompiled, not served",
       "neuron_cc_wrapper", {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {},
       [](Context& c) {
         compile_done(c);
         std::string neff = npc::test::read_text(c.entry / "model.neff");
         neff[neff.size() - 1] ^= 1;
         write(c.entry / "model.neff", neff);
       },
       0, Match::stderr_line,
       "neuron_cc_wrapper: warning: <E>: the cached NEFF does not match its integrity record; compiling it again"},
      {"AlteredNeffVerify", "`neuron_cache verify` on an altered `model.neff`", "neuron_cache", {"verify"}, {},
       [](Context& c) {
         compile_done(c);
         std::string neff = npc::test::read_text(c.entry / "model.neff");
         neff[0] ^= 1;
         write(c.entry / "model.neff", neff);
       },
       1, Match::stdout_line, "BAD neuronxcc-<V>/<M>: NEFF does not match its integrity record"},
      {"CorruptEntryRecordServed", "a done entry whose `npc-entry.json` is not JSON: recompiled, not served",
       "neuron_cc_wrapper", {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {},
       [](Context& c) {
         compile_done(c);
         write(c.entry / "npc-entry.json", "{\"neff\": ");
       },
       0, Match::stderr_line,
       "neuron_cc_wrapper: warning: cannot serve <E>: <E>/npc-entry.json is corrupt: not a JSON object; compiling "
       "instead"},
      {"CorruptEntryRecordVerify", "`neuron_cache verify` on an `npc-entry.json` with wrong types", "neuron_cache",
       {"verify"}, {},
       [](Context& c) {
         compile_done(c);
         write(c.entry / "npc-entry.json", "{\"neff\": {\"sha256\": 5}}");
       },
       1, Match::stdout_line,
       "BAD neuronxcc-<V>/<M>: <E>/npc-entry.json is corrupt: 'neff' has fields of the wrong type"},
      {"DoneMarkerWithoutNeff", "`neuron_cache verify` on a `model.done` with no `model.neff`", "neuron_cache",
       {"verify"}, {},
       [](Context& c) {
         compile_done(c);
         fs::remove(c.entry / "model.neff");
       },
       1, Match::stdout_line, "BAD neuronxcc-<V>/<M>: done marker without a NEFF"},
      // ---- locks ----
      {"LockFileWithGarbage", "`npc-compile.lock` full of garbage, held by nobody: taken over silently",
       "neuron_cc_wrapper", {"compile-entry", "<E>"}, {},
       [](Context& c) {
         extract(c);
         write(c.entry / "npc-compile.lock", std::string("\x7f" "ELF\x01\x02 garbage\npid=-1 host=\n", 28));
       },
       0, Match::stdout_prefix, "Compiled <E> in "},
      {"LockFileIsASymlink", "`model.hlo_module.pb.lock` that is a symlink (to /etc/passwd)", "neuron_cc_wrapper",
       {"compile-entry", "<E>"}, {},
       [](Context& c) {
         extract(c);
         fs::create_symlink("/etc/passwd", c.entry / "model.hlo_module.pb.lock");
       },
       3, Match::only_line,
       "neuron_cc_wrapper: error: cannot open <E>/model.hlo_module.pb.lock: Too many levels of symbolic links"},
      {"StaleLockIsCleared", "`neuron_cache clear-locks` with a lock file left by a dead process", "neuron_cache",
       {"clear-locks"}, {},
       [](Context& c) {
         extract(c);
         write(c.entry / "npc-compile.lock", "pid=999999 host=gone start=1 tool=neuron_cc_wrapper\n");
       },
       0, Match::stdout_line, "removed <E>/npc-compile.lock"},
      // ---- compile-entry ----
      {"CompileEntryNotAnEntry", "`compile-entry` on a directory that is no entry", "neuron_cc_wrapper",
       {"compile-entry", "<D>"}, {}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: <D> is not a cache entry directory (.../neuronxcc-<version>/MODULE_<hash>+<hash>)"},
      {"CompileEntryMissing", "`compile-entry` on an entry that does not exist", "neuron_cc_wrapper",
       {"compile-entry", "<C>/neuronxcc-<V>/MODULE_0123456789abcdef0123+01234567"}, {}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: no cache entry at <C>/neuronxcc-<V>/MODULE_0123456789abcdef0123+01234567"},
      {"CompileEntryTwoDirectories", "`compile-entry` given two directories", "neuron_cc_wrapper",
       {"compile-entry", "<E>", "<D>"}, {}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: compile-entry takes one entry directory, got a second: <D>"},
      {"CompileEntryCompilerFlags", "`compile-entry` given a compiler flag", "neuron_cc_wrapper",
       {"compile-entry", "<E>", "--auto-cast=all"}, {}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: compile-entry takes its compiler flags from the entry's compile_flags.json, not "
       "'--auto-cast=all'"},
      // ---- graph paths from the trial ----
      {"TrialPathOutsideCache", "a trial output line naming a graph outside the cache (`/etc/passwd`)",
       "neuron_parallel_compile",
       {"--parallel_compile_workdir", "<D>/w", "--", "/bin/echo",
        "Extracting graphs (/etc/passwd) for ahead-of-time parallel compilation. No compilation was done."},
       {}, nothing, 1, Match::stderr_line,
       "neuron_parallel_compile: warning: refusing graph '/etc/passwd' (from the trial's output): outside the cache "
       "<C>"},
      {"TrialPathEscapingWithDotDot", "a trial output line escaping the cache with `..`", "neuron_parallel_compile",
       {"--parallel_compile_workdir", "<D>/w", "--", "/bin/echo",
        "Extracting graphs (<C>/neuronxcc-<V>/../../../etc/model.hlo_module.pb) for ahead-of-time parallel "
        "compilation."},
       {}, nothing, 1, Match::stderr_line,
       "neuron_parallel_compile: warning: refusing graph '<C>/neuronxcc-<V>/../../../etc/model.hlo_module.pb' (from "
       "the trial's output): outside the cache <C>"},
      {"TrialPathRelative", "a trial output line with a relative path", "neuron_parallel_compile",
       {"--parallel_compile_workdir", "<D>/w", "--", "/bin/echo",
        "Extracting graphs (neuronxcc-<V>/MODULE_aa+bb/model.hlo_module.pb) for ahead-of-time parallel compilation."},
       {}, nothing, 1, Match::stderr_line,
       "neuron_parallel_compile: warning: refusing graph 'neuronxcc-<V>/MODULE_aa+bb/model.hlo_module.pb' (from the "
       "trial's output): not an absolute path"},
      {"TrialPathSymlinkOut", "a trial output line naming a symlink inside the cache that points outside",
       "neuron_parallel_compile",
       {"--parallel_compile_workdir", "<D>/w", "--", "/bin/echo",
        "Extracting graphs (<C>/neuronxcc-<V>/MODULE_0123456789abcdef0123+01234567/model.hlo_module.pb) for "
        "ahead-of-time parallel compilation."},
       {},
       [](Context& c) {
         fs::path entry = c.cache / ("neuronxcc-" + kVersion) / "MODULE_0123456789abcdef0123+01234567";
         fs::create_directories(entry.parent_path());
         fs::create_directories(c.dir / "outside");
         write(c.dir / "outside" / "model.hlo_module.pb", "HloModule evil\n");
         fs::create_directory_symlink(c.dir / "outside", entry);
       },
       1, Match::stderr_line,
       "neuron_parallel_compile: warning: refusing graph "
       "'<C>/neuronxcc-<V>/MODULE_0123456789abcdef0123+01234567/model.hlo_module.pb' (from the trial's output): "
       "outside the cache <C>"},
      {"TrialPathOtherVersion", "a trial output line naming another compiler version's entry",
       "neuron_parallel_compile",
       {"--parallel_compile_workdir", "<D>/w", "--", "/bin/echo",
        "Extracting graphs (<C>/neuronxcc-9.9.9/MODULE_0123456789abcdef0123+01234567/model.hlo_module.pb) for "
        "ahead-of-time parallel compilation."},
       {}, nothing, 1, Match::stderr_line,
       "neuron_parallel_compile: warning: refusing graph "
       "'<C>/neuronxcc-9.9.9/MODULE_0123456789abcdef0123+01234567/model.hlo_module.pb' (from the trial's output): "
       "extracted for compiler version 9.9.9, but we compile with <V>"},
      {"TrialPathNotAGraph", "a trial output line naming another file inside the cache", "neuron_parallel_compile",
       {"--parallel_compile_workdir", "<D>/w", "--", "/bin/echo",
        "Extracting graphs (<C>/.npc/last-eviction) for ahead-of-time parallel compilation."},
       {}, nothing, 1, Match::stderr_line,
       "neuron_parallel_compile: warning: refusing graph '<C>/.npc/last-eviction' (from the trial's output): not a "
       "model.hlo_module.pb file"},
      {"TrialPathWithEscapeSequence", "a trial output line whose path holds a terminal escape sequence",
       "neuron_parallel_compile",
       {"--parallel_compile_workdir", "<D>/w", "--", "/bin/echo",
        "Extracting graphs (/tmp/\x1b[2J\x1b[31mevil\r) for ahead-of-time parallel compilation."},
       {}, nothing, 1, Match::stderr_line,
       "neuron_parallel_compile: warning: refusing graph '/tmp/\\x1b[2J\\x1b[31mevil\\r' (from the trial's "
       "output): outside the cache <C>"},
      // ---- the launcher's command line ----
      {"LauncherUnknownOption", "an unknown option before the command", "neuron_parallel_compile",
       {"--frobnicate", "true"}, {}, nothing, 2, Match::only_line,
       "neuron_parallel_compile: error: unknown option '--frobnicate' before the command (put the command after -- "
       "if it starts with '-')"},
      {"LauncherNoCommand", "no training command", "neuron_parallel_compile", {}, {}, nothing, 2, Match::only_line,
       "neuron_parallel_compile: error: no command to run: give the training command after the options, e.g. "
       "neuron_parallel_compile torchrun --nproc_per_node=2 train.py"},
      {"LauncherBadMode", "`--command bogus`", "neuron_parallel_compile", {"--command", "bogus"}, {}, nothing, 2,
       Match::only_line,
       "neuron_parallel_compile: error: --command has the bad value 'bogus': expected collect-and-compile, collect, "
       "compile, check, clean, clear-locks, clear-neffs, scan, scan-with-failed or analyze"},
      {"LauncherNodeIdTooBig", "`--node_id 2 --world_size 2`", "neuron_parallel_compile",
       {"--node_id", "2", "--world_size", "2", "true"}, {}, nothing, 2, Match::only_line,
       "neuron_parallel_compile: error: --node_id 2 must be below --world_size 2"},
      {"LauncherZeroParallel", "`--num_parallel 0`", "neuron_parallel_compile", {"--num_parallel", "0", "true"}, {},
       nothing, 2, Match::only_line,
       "neuron_parallel_compile: error: --num_parallel: 0 is out of range (give 1 to 4096) (run with --help for usage)"},
      {"LauncherWordParallel", "`--num_parallel abc`", "neuron_parallel_compile", {"--num_parallel", "abc", "true"},
       {}, nothing, 2, Match::only_line,
       "neuron_parallel_compile: error: --num_parallel: 'abc' is not a whole number (give 1 to 4096) (run with "
       "--help for usage)"},
      {"LauncherIgnoreTrialErrorMaybe", "`NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE=maybe`",
       "neuron_parallel_compile", {"--parallel_compile_workdir", "<D>/w", "false"},
       {{"NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE", "maybe"}}, nothing, 2, Match::only_line,
       "neuron_parallel_compile: error: NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE=maybe: not a yes/no value; "
       "set it to 1 (yes) or 0 (no), or unset it"},
      {"LauncherRetriesFromEnvironment", "`NEURON_PARALLEL_COMPILE_MAX_RETRIES=abc`", "neuron_parallel_compile",
       {"true"}, {{"NEURON_PARALLEL_COMPILE_MAX_RETRIES", "abc"}}, nothing, 2, Match::only_line,
       "neuron_parallel_compile: error: NEURON_PARALLEL_COMPILE_MAX_RETRIES has the bad value 'abc': expected a whole "
       "number from 0 to 1000"},
      {"LauncherZeroTimeout", "`--compile-timeout 0`", "neuron_parallel_compile", {"--compile-timeout", "0", "true"},
       {}, nothing, 2, Match::only_line,
       "neuron_parallel_compile: error: --compile-timeout has the bad value '0': expected a positive number of seconds"},
      {"LauncherLockTimeoutBelowAMillisecond", "`--lock-timeout 0.0001`", "neuron_parallel_compile",
       {"--lock-timeout", "0.0001", "true"}, {}, nothing, 2, Match::only_line,
       "neuron_parallel_compile: error: --lock-timeout has the bad value '0.0001': expected a positive number of "
       "seconds"},
      {"LauncherAmbiguousOptionPrefix", "`--n 2` (both --node_id and --num_parallel start so)",
       "neuron_parallel_compile", {"--n", "2", "true"}, {}, nothing, 2, Match::only_line,
       "neuron_parallel_compile: error: ambiguous option '--n': could match --num_parallel, --node_id"},
      {"LauncherBadMemory", "`--memory-per-compile lots`", "neuron_parallel_compile",
       {"--memory-per-compile", "lots", "true"}, {}, nothing, 2, Match::only_line,
       "neuron_parallel_compile: error: --memory-per-compile has the bad value 'lots': expected a size in bytes such "
       "as 8GB, or auto"},
      {"LauncherCommandNotFound", "a training command that does not exist", "neuron_parallel_compile",
       {"--parallel_compile_workdir", "<D>/w", "nosuch-train-command"}, {}, nothing, 2, Match::stderr_prefix,
       "neuron_parallel_compile: error: cannot run the training command: nosuch-train-command was not found on PATH ("},
      {"LauncherCommandNotExecutable", "a training command without the execute bit", "neuron_parallel_compile",
       {"--parallel_compile_workdir", "<D>/w", "<D>/train.sh"}, {},
       [](Context& c) { write(c.dir / "train.sh", "#!/bin/sh\necho hi\n"); }, 2, Match::stderr_line,
       "neuron_parallel_compile: error: cannot run the training command: <D>/train.sh is not an executable file"},
      {"LauncherCompileModeWithCommand", "`--command compile` followed by a training command",
       "neuron_parallel_compile", {"--command", "compile", "true"}, {}, nothing, 2, Match::only_line,
       "neuron_parallel_compile: error: --command compile runs no training command, but one was given: true"},
      {"LauncherWithNoCache", "`NEURON_CC_FLAGS=--no_cache` for the launcher", "neuron_parallel_compile",
       {"--parallel_compile_workdir", "<D>/w", "true"}, {{"NEURON_CC_FLAGS", "--no_cache"}}, nothing, 0,
       Match::stderr_line,
       "neuron_parallel_compile: warning: NEURON_CC_FLAGS has --no_cache; ignored, as the original does: the "
       "compiled graphs go into the cache"},
      // ---- what is at a path the user names ----
      // Inputs must be regular files: a device is never read to its end, a
      // FIFO without a writer never opened.
      {"WrapperGraphIsACharacterDevice", "`--graph /dev/zero` (a device that never ends)", "neuron_cc_wrapper",
       {"compile", "--graph", "/dev/zero", "--output", "<D>/o.neff"}, {}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: cannot read the graph: /dev/zero is a character device, not a regular file"},
      {"WrapperGraphIsAFifo", "`--graph` naming a FIFO nobody writes to", "neuron_cc_wrapper",
       {"compile", "--graph", "<D>/graph.fifo", "--output", "<D>/o.neff"}, {},
       [](Context& c) { make_fifo(c.dir / "graph.fifo"); }, 2, Match::only_line,
       "neuron_cc_wrapper: error: cannot read the graph: <D>/graph.fifo is a FIFO, not a regular file"},
      {"WrapperExtractGraphIsAFifo", "`--graph` naming a FIFO while extracting graphs", "neuron_cc_wrapper",
       {"compile", "--graph", "<D>/graph.fifo", "--output", "<D>/o.neff"}, {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}},
       [](Context& c) { make_fifo(c.dir / "graph.fifo"); }, 2, Match::only_line,
       "neuron_cc_wrapper: error: cannot read the graph: <D>/graph.fifo is a FIFO, not a regular file"},
      {"WrapperKeyGraphIsACharacterDevice", "`key --graph /dev/zero`", "neuron_cc_wrapper",
       {"key", "--graph", "/dev/zero"}, {}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: cannot read the graph: /dev/zero is a character device, not a regular file"},
      {"WrapperNoCacheGraphIsACharacterDevice", "`--graph /dev/zero` with `--no_cache` (the compiler reads it)",
       "neuron_cc_wrapper", {"compile", "--graph", "/dev/zero", "--output", "<D>/o.neff"},
       {{"NEURON_CC_FLAGS", "--cache_dir=<D>/c --no_cache"}}, nothing, 2, Match::only_line,
       "neuron_cc_wrapper: error: cannot read the graph: /dev/zero is a character device, not a regular file"},
      {"CacheToolImportCharacterDevice", "`neuron_cache import /dev/zero`", "neuron_cache", {"import", "/dev/zero"},
       {}, nothing, 2, Match::only_line,
       "neuron_cache: error: cannot import the bundle: /dev/zero is a character device, not a regular file"},
      {"CacheToolImportFifo", "`neuron_cache import` of a FIFO nobody writes to", "neuron_cache",
       {"import", "<D>/bundle.fifo"}, {}, [](Context& c) { make_fifo(c.dir / "bundle.fifo"); }, 2, Match::only_line,
       "neuron_cache: error: cannot import the bundle: <D>/bundle.fifo is a FIFO, not a regular file"},
      {"CacheToolExportFromReportFifo", "`neuron_cache export --from-report` naming a FIFO", "neuron_cache",
       {"export", "--from-report", "<D>/report.fifo", "-o", "<D>/b.tar.zst"}, {},
       [](Context& c) { make_fifo(c.dir / "report.fifo"); }, 2, Match::only_line,
       "neuron_cache: error: cannot use the report: <D>/report.fifo is a FIFO, not a regular file"},
      // Outputs are written as a shell's redirection would: through a device
      // or FIFO (never replacing it), at a symlink's target; a failed write
      // is an error; an output that cannot be written is found before the work.
      {"WrapperOutputFullDevice", "`--output` a full device (a link to `/dev/full`), after a compile",
       "neuron_cc_wrapper", {"compile", "--graph", "<G>", "--output", "<D>/full"}, {}, link_full_device, 3,
       Match::only_line, "neuron_cc_wrapper: error: --output: cannot write <D>/full: No space left on device"},
      {"WrapperServedToFullDevice", "`--output` a full device (a link to `/dev/full`), on a cache hit",
       "neuron_cc_wrapper", {"compile", "--graph", "<G>", "--output", "<D>/full"}, {},
       [](Context& c) {
         compile_done(c);
         link_full_device(c);
       },
       3, Match::only_line, "neuron_cc_wrapper: error: --output: cannot write <D>/full: No space left on device"},
      {"WrapperOutputIsADirectory", "`--output` naming a directory", "neuron_cc_wrapper",
       {"compile", "--graph", "<G>", "--output", "<D>"}, {}, nothing, 3, Match::only_line,
       "neuron_cc_wrapper: error: --output: cannot write <D>: Is a directory (name a file in a writable directory)"},
      {"WrapperOutputDirectoryMissing", "`--output` in a directory that does not exist (found before compiling)",
       "neuron_cc_wrapper", {"compile", "--graph", "<G>", "--output", "<D>/missing/o.neff"}, {}, nothing, 3,
       Match::only_line,
       "neuron_cc_wrapper: error: --output: cannot write <D>/missing/o.neff: No such file or directory (name a file "
       "in a writable directory)"},
      {"CacheToolExportToFullDevice", "`neuron_cache export -o` a full device (a link to `/dev/full`)",
       "neuron_cache", {"export", "--all", "-o", "<D>/full"}, {},
       [](Context& c) {
         compile_done(c);
         link_full_device(c);
       },
       3, Match::only_line,
       "neuron_cache: error: cannot write the bundle <D>/full: Write error: No space left on device"},
      {"CacheToolExportDirectoryMissing", "`neuron_cache export -o` in a directory that does not exist",
       "neuron_cache", {"export", "--all", "-o", "<D>/missing/b.tar.zst"}, {}, compile_done, 3, Match::only_line,
       "neuron_cache: error: --output: cannot write <D>/missing/b.tar.zst: No such file or directory"},
      {"LauncherReportDirectoryMissing", "`--report` in a directory that does not exist (found before the trial)",
       "neuron_parallel_compile", {"--parallel_compile_workdir", "<D>/w", "--report", "<D>/missing/r.json", "true"},
       {}, nothing, 3, Match::only_line,
       "neuron_parallel_compile: error: --report: cannot write <D>/missing/r.json: No such file or directory (name a "
       "file in a writable directory)"},
      {"LauncherReportIsADirectory", "`--report` naming a directory (found before the trial)",
       "neuron_parallel_compile", {"--parallel_compile_workdir", "<D>/w", "--report", "<D>", "true"}, {}, nothing, 3,
       Match::only_line,
       "neuron_parallel_compile: error: --report: cannot write <D>: Is a directory (name a file in a writable "
       "directory)"},
      {"LauncherReportToFullDevice", "`--report` a full device (a link to `/dev/full`)", "neuron_parallel_compile",
       {"--parallel_compile_workdir", "<D>/w", "--report", "<D>/full", "true"}, {}, link_full_device, 3,
       Match::stderr_line, "neuron_parallel_compile: error: --report: cannot write <D>/full: No space left on device"},
      {"LauncherTraceDirectoryMissing", "`--trace` in a directory that does not exist (found before the trial)",
       "neuron_parallel_compile", {"--parallel_compile_workdir", "<D>/w", "--trace", "<D>/missing/t.json", "true"},
       {}, nothing, 3, Match::only_line,
       "neuron_parallel_compile: error: --trace: cannot write <D>/missing/t.json: No such file or directory (name a "
       "file in a writable directory)"},
      {"LauncherTraceIsADirectory", "`--trace` naming a directory (found before the trial)",
       "neuron_parallel_compile", {"--parallel_compile_workdir", "<D>/w", "--trace", "<D>", "true"}, {}, nothing, 3,
       Match::only_line,
       "neuron_parallel_compile: error: --trace: cannot write <D>: Is a directory (name a file in a writable "
       "directory)"},
      {"LauncherTraceToFullDevice", "`--trace` a full device (a link to `/dev/full`)", "neuron_parallel_compile",
       {"--parallel_compile_workdir", "<D>/w", "--trace", "<D>/full", "true"}, {}, link_full_device, 3,
       Match::stderr_line, "neuron_parallel_compile: error: --trace: cannot write <D>/full: No space left on device"},
      {"LauncherWorkdirIsAFile", "`--parallel_compile_workdir` naming a regular file", "neuron_parallel_compile",
       {"--parallel_compile_workdir", "<D>/wfile", "true"}, {}, [](Context& c) { write(c.dir / "wfile", "x"); }, 3,
       Match::only_line,
       "neuron_parallel_compile: error: --parallel_compile_workdir: cannot use <D>/wfile as a directory: it exists "
       "and is not one (name a writable directory)"},
      // ---- the usage counters (neuron_cache stats) ----
      {"StatsShardsAllFifosHit", "a FIFO in every usage-counter shard's place (`<C>/.npc/stats/N.json`): a hit",
       "neuron_cc_wrapper", {"compile", "--graph", "<G>", "--output", "<D>/o.neff"}, {},
       [](Context& c) {
         compile_done_counters_emptied(c);
         for (int i = 0; i < 16; ++i) make_fifo(counters_shard(c, i));
       },
       0, Match::stdout_line,
       "Using a cached neff at <E>/model.neff. Exiting with a successfully compiled graph."},
      {"StatsShardIsAFifo", "a FIFO in a usage-counter shard's place", "neuron_cache", {"stats"}, {},
       [](Context& c) {
         compile_done_counters_emptied(c);
         make_fifo(counters_shard(c, 3));
       },
       0, Match::only_line,
       "neuron_cache: warning: the counters of 1 file are not in the sums: <C>/.npc/stats/3.json is a FIFO, not a "
       "file (remove it, or run neuron_cache stats --zero, which also empties the other counters)"},
      {"StatsFolderIsAFile", "`<C>/.npc/stats` a regular file", "neuron_cache", {"stats"}, {},
       [](Context& c) {
         compile_done(c);
         fs::remove_all(counters_dir(c));
         write(counters_dir(c), "x");
       },
       0, Match::only_line,
       "neuron_cache: warning: the counters of 1 file are not in the sums: <C>/.npc/stats is a regular file, not a "
       "directory (remove it, or run neuron_cache stats --zero, which also empties the other counters)"},
      {"StatsShardNegativeCount", "a usage-counter shard with a negative count", "neuron_cache", {"stats"}, {},
       [](Context& c) {
         compile_done_counters_emptied(c);
         write(counters_shard(c, 3), R"({"programs":{"neuron_cc_wrapper":{"hits":-5}}})");
       },
       0, Match::only_line,
       "neuron_cache: warning: the counters of 1 file are not in the sums: <C>/.npc/stats/3.json is torn "
       "('neuron_cc_wrapper' has hits -5, not a count from 0 to 2^53) (the next count in it rewrites it)"},
      {"StatsShardHugeCompileTime", "a usage-counter shard with a compile time of 9.3e18 seconds", "neuron_cache",
       {"stats"}, {},
       [](Context& c) {
         compile_done_counters_emptied(c);
         write(counters_shard(c, 3), R"({"programs":{"neuron_cc_wrapper":{"compile_seconds":9.3e18}}})");
       },
       0, Match::only_line,
       "neuron_cache: warning: the counters of 1 file are not in the sums: <C>/.npc/stats/3.json is torn "
       "('neuron_cc_wrapper' has compile_seconds 9.3e+18, not a number of seconds from 0 to 1e13) (the next count "
       "in it rewrites it)"},
      {"StatsZeroReplacesAFifo", "`stats --zero` with a FIFO in a usage-counter shard's place", "neuron_cache",
       {"stats", "--zero"}, {},
       [](Context& c) {
         compile_done_counters_emptied(c);
         make_fifo(counters_shard(c, 3));
       },
       0, Match::stdout_line, "replaced <C>/.npc/stats/3.json is a FIFO, not a file"},
      {"StatsZeroDirectoryWithFiles", "`stats --zero` with a directory holding a file in a shard's place",
       "neuron_cache", {"stats", "--zero"}, {},
       [](Context& c) {
         compile_done_counters_emptied(c);
         write(counters_shard(c, 3) / "notes", "mine\n");
       },
       3, Match::only_line,
       "neuron_cache: error: stats --zero: 1 of the counters' files in <C>/.npc/stats not zeroed: "
       "<C>/.npc/stats/3.json is a directory with files in it, not a file (remove it yourself (rm -r "
       "<C>/.npc/stats/3.json) and run again)"},
      // ---- neuron_cache ----
      {"CacheToolBadKey", "`neuron_cache rm` with something that is not a key", "neuron_cache", {"rm", "nonsense"}, {},
       nothing, 2, Match::only_line,
       "neuron_cache: error: 'nonsense' is not a cache key (expected neuronxcc-<version>/MODULE_<hash>+<hash> or "
       "MODULE_<hash>+<hash>)"},
      {"CacheToolMissingKey", "`neuron_cache rm` of an entry that is not there", "neuron_cache",
       {"rm", "MODULE_0123456789abcdef0123+01234567"}, {}, nothing, 1, Match::only_line,
       "neuron_cache: error: no cache entry MODULE_0123456789abcdef0123+01234567 in <C>"},
      {"CacheToolUnknownCommand", "`neuron_cache` with an unknown subcommand", "neuron_cache", {"frobnicate"}, {},
       nothing, 2, Match::stderr_prefix, "neuron_cache: error: "},
  };
  return table;
}

// Rows whose message is a product bug: the message asserted is the one the
// fixed product must print; each is a DISABLED_ test until then. The table in
// docs/bad-inputs.md shows what is printed today.
//
// BUG (reported) CacheToolBadPruneSize: `neuron_cache prune --max-size abc`
// says "prune: --cache_size has the bad value 'abc'", naming an option the
// user never typed (src/cli/neuron_cache.cpp passes "--cache_size=" + the
// value to split_cache_options). Same for `prune --ttl x` ("--cache_ttl").
// Fix: check the value with util::parse_bytes / parse_non_negative there and
// name --max-size / --ttl.
//
// BUG (reported) LauncherCommandNotExecutableOneLine: when the training
// command cannot be started, the launcher first prints "running the trial in
// graph-extraction mode; its output is also in <workdir>/trial.<pid>.log"
// (a log that stays empty), then the error: two lines for one failure, the
// first of them untrue. Fix: resolve the command (util::find_executable) in
// run() before announcing the trial, or announce it only once spawn()
// succeeded (src/launcher/run.cpp, src/launcher/trial.cpp).
const std::vector<BadInput>& bug_rows() {
  static const std::vector<BadInput> table = {
      {"CacheToolBadPruneSize", "`neuron_cache prune --max-size abc`", "neuron_cache", {"prune", "--max-size", "abc"},
       {}, nothing, 2, Match::only_line,
       "neuron_cache: error: prune: --max-size has the bad value 'abc': expected a size in bytes such as "
       "100000000000 or 100GB"},
      {"CacheToolBadPruneTtl", "`neuron_cache prune --ttl soon`", "neuron_cache", {"prune", "--ttl", "soon"}, {},
       nothing, 2, Match::only_line,
       "neuron_cache: error: prune: --ttl has the bad value 'soon': expected a non-negative number of days such as 30"},
      {"LauncherCommandNotExecutableOneLine", "a training command without the execute bit (one line)",
       "neuron_parallel_compile", {"--parallel_compile_workdir", "<D>/w", "<D>/train.sh"}, {},
       [](Context& c) { write(c.dir / "train.sh", "#!/bin/sh\necho hi\n"); }, 2, Match::only_line,
       "neuron_parallel_compile: error: cannot run the training command: <D>/train.sh is not an executable file"},
  };
  return table;
}

void PrintTo(const BadInput& row, std::ostream* os) { *os << row.name; }

// A problem the oracle (check_cache) must find in the cache a row leaves:
// a line that starts with `starts` and holds `holds` (placeholders as in the
// table). The NEFF digests in the integrity lines are not known in advance.
struct CacheProblem {
  const char* starts;
  const char* holds;
};

// Rows that corrupt a done entry on purpose for `neuron_cache verify` to find:
// verify reports without repairing, so the cache they leave holds exactly this
// problem. Every other row must leave a consistent cache.
const std::map<std::string, CacheProblem>& cache_problems_left() {
  static const std::map<std::string, CacheProblem> problems = {
      {"TruncatedNeffVerify", {"neuronxcc-<V>/<M>: NEFF (100 bytes, ", ") fails its integrity record {"}},
      {"AlteredNeffVerify", {"neuronxcc-<V>/<M>: NEFF (", ") fails its integrity record {"}},
      {"CorruptEntryRecordVerify",
       {"neuronxcc-<V>/<M>: done, but npc-entry.json has no NEFF record: {\"neff\": {\"sha256\": 5}}", ""}},
      {"DoneMarkerWithoutNeff", {"neuronxcc-<V>/<M>: done without a NEFF", ""}},
  };
  return problems;
}

class BadInputTest : public npc::test::CacheTest, public ::testing::WithParamInterface<BadInput> {
protected:
  std::string fill(std::string text) const {
    std::string module = entry_.filename().string();
    for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"<E>", entry_.string()}, {"<C>", cache_root().string()}, {"<G>", graph_.string()},
             {"<D>", dir().string()}, {"<V>", kVersion}, {"<M>", module}}) {
      for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
    }
    return text;
  }
  std::string unfill(std::string text) const {
    for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
             {entry_.string(), "<E>"}, {cache_root().string(), "<C>"}, {graph_.string(), "<G>"},
             {dir().string(), "<D>"}, {kVersion, "<V>"}, {entry_.filename().string(), "<M>"}}) {
      for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
    }
    return text;
  }
  void SetUp() override {
    CacheTest::SetUp();
    graph_ = dir() / "sample.hlo";
    npc::test::write_text(graph_, "HloModule bad_input_sample\n\nENTRY main {}\n");
    auto key = run_tool("neuron_cc_wrapper", {"key", "--graph", graph_.string()});
    ASSERT_EQ(key.exit_code, 0) << key.describe();
    entry_ = key.out.substr(0, key.out.find('\n'));
  }
  void run_row(const BadInput& row);
  fs::path graph_, entry_;
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// A word as a shell would need it, placeholders (<D>, <G>, ...) left bare.
std::string display_word(const std::string& word) {
  std::string bare = word;
  for (char& c : bare)
    if (c == '<' || c == '>') c = 'x';
  return util::quote_shell_word(bare) == bare ? word : util::quote_shell_word(word);
}

std::string markdown_cell(const std::string& text) {
  std::string out;
  // Control characters and bytes that are not UTF-8 (a row's 0xff, an
  // escape sequence) shown as \xNN, not raw.
  for (char c : util::printable_text(text, util::LineBreaks::keep)) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += "<br>";
    else out.push_back(c);
  }
  return out;
}

TEST_P(BadInputTest, ExactMessageAndExitCode) { run_row(GetParam()); }

class BadInputBugTest : public BadInputTest {};

TEST_P(BadInputBugTest, ExactMessageAndExitCode) { run_row(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Bugs, BadInputBugTest, ::testing::ValuesIn(bug_rows()),
                         [](const ::testing::TestParamInfo<BadInput>& info) { return std::string(info.param.name); });

void BadInputTest::run_row(const BadInput& row) {
  Context context{dir(), cache_root(), entry_, graph_,
                  [this](std::vector<std::string> args, std::map<std::string, std::string> env) {
                    return run_tool("neuron_cc_wrapper", std::move(args), std::move(env));
                  }};
  row.setup(context);
  ASSERT_FALSE(HasFatalFailure());
  std::vector<std::string> args;
  for (const auto& a : row.args) args.push_back(fill(a));
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : row.env) env[k] = fill(v);
  auto r = run_tool(row.program, args, env);
  std::string expected = fill(row.message);
  EXPECT_EQ(r.exit_code, row.exit_code) << r.describe();
  EXPECT_FALSE(r.signaled) << r.describe();
  auto err_lines = lines_of(r.err);
  auto out_lines = lines_of(r.out);
  std::string observed; // the line that matched, or what was there
  switch (row.match) {
  case Match::only_line:
    EXPECT_EQ(r.err, expected + "\n") << "expected exactly one line on stderr\n" << r.describe();
    observed = err_lines.empty() ? "" : err_lines.front();
    break;
  case Match::stderr_line:
  case Match::stdout_line: {
    const auto& lines = row.match == Match::stderr_line ? err_lines : out_lines;
    bool found = std::find(lines.begin(), lines.end(), expected) != lines.end();
    EXPECT_TRUE(found) << "expected the line\n  " << expected << "\n" << r.describe();
    observed = found ? expected : (lines.empty() ? "" : lines.front());
    break;
  }
  case Match::stdout_prefix: {
    auto it = std::find_if(out_lines.begin(), out_lines.end(), [&](const std::string& l) { return l.starts_with(expected); });
    EXPECT_TRUE(it != out_lines.end()) << "expected a line starting\n  " << expected << "\n" << r.describe();
    observed = it != out_lines.end() ? *it : "";
    break;
  }
  case Match::stderr_prefix: {
    auto it = std::find_if(err_lines.begin(), err_lines.end(), [&](const std::string& l) { return l.starts_with(expected); });
    EXPECT_TRUE(it != err_lines.end()) << "expected a line starting\n  " << expected << "\n" << r.describe();
    observed = it != err_lines.end() ? *it : "";
    break;
  }
  }
  // Whatever the input, the cache it leaves is consistent, but for the
  // corruption a verify row made on purpose, which is left as it was.
  auto check = check_cache(cache_root(), {}, true);
  if (auto it = cache_problems_left().find(row.name); it != cache_problems_left().end()) {
    EXPECT_EQ(check.done, 1u) << "verify must not repair or remove the entry: " << check.describe();
    ASSERT_EQ(check.problems.size(), 1u) << check.describe();
    const std::string& problem = check.problems.front();
    EXPECT_TRUE(problem.starts_with(fill(it->second.starts))) << "expected a problem starting\n  "
                                                              << fill(it->second.starts) << "\n" << check.describe();
    EXPECT_NE(problem.find(fill(it->second.holds)), std::string::npos) << check.describe();
  } else {
    EXPECT_TRUE(check.problems.empty()) << check.describe();
  }

  if (auto doc = util::env("NPC_BAD_INPUTS_DOC"); doc && !doc->empty()) {
    std::string cmd = row.program;
    for (const auto& a : row.args) cmd += " " + display_word(a);
    std::string env_text;
    for (const auto& [k, v] : row.env) env_text += (env_text.empty() ? "" : " ") + k + "=" + display_word(v);
    const char* where = row.match == Match::stdout_line || row.match == Match::stdout_prefix ? " (stdout)"
                        : row.match == Match::stderr_prefix ? " (start)"
                                                        : "";
    std::string line = "| " + std::string(row.name) + " | " + markdown_cell(row.input) + " | `" +
                       markdown_cell((env_text.empty() ? "" : env_text + " ") + cmd) + "` | " +
                       std::to_string(r.exit_code) + " | `" + markdown_cell(unfill(observed)) + "`" + where + " |";
    std::ignore = util::append_line(*doc, line);
  }
  record_figures({{"bad_inputs", 1}});
}

INSTANTIATE_TEST_SUITE_P(Table, BadInputTest, ::testing::ValuesIn(rows()),
                         [](const ::testing::TestParamInfo<BadInput>& info) { return std::string(info.param.name); });

// The table in docs/bad-inputs.md has a row for every test here and more than
// 25 of them.
TEST(BadInputTable, HasAtLeastTwentyFiveRowsAndTheDocListsThemAll) {
  EXPECT_GE(rows().size(), 25u);
  for (const auto& expectation : cache_problems_left()) {
    const std::string& name = expectation.first;
    EXPECT_TRUE(std::any_of(rows().begin(), rows().end(), [&](const BadInput& r) { return r.name == name; }))
        << name << " expects a cache problem but is no row of the table";
  }
  std::string doc = npc::test::read_text(npc::test::source_dir() / "docs" / "bad-inputs.md");
  ASSERT_FALSE(doc.empty()) << "docs/bad-inputs.md is missing or empty: it must list every row "
                               "(tests/reliability/bad_inputs_doc.sh regenerates it)";
  for (const auto& row : rows())
    EXPECT_NE(doc.find(std::string("| ") + row.name + " |"), std::string::npos) << row.name << " missing from the doc";
}

} // namespace
} // namespace npc::reltest
