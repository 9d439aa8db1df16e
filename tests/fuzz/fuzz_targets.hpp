#pragma once
// The bodies of the fuzz targets, as plain functions: the libFuzzer entry
// points (fuzz_main.cpp, clang only) and the regression tests (every
// compiler) call the same code. Each parses its input with the product's
// reader and checks a property of the result; a broken property comes back
// as a message (the fuzzer aborts on it, the test fails with it).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npc::fuzz {

using Violation = std::optional<std::string>;
using Body = Violation (*)(std::string_view input);

struct Target {
  const char* name; // also the corpus folder: tests/fuzz/corpus/<name>/
  const char* what;
  Body body;
};

// split_shell_words: a split that succeeds joins (quoted) and splits back to
// the same words.
Violation shell_words(std::string_view input);
// parse_neuron_cc_flags: only UsageError may escape; no cache option is left
// among the compiler flags; splitting the flags again changes nothing.
Violation neuron_cc_flags(std::string_view input);
// parse_compile_flags: what parses serializes and parses back the same.
Violation compile_flags(std::string_view input);
// parse_entry_meta: what parses serializes to a record that parses back to
// the same record (a record we rewrite must stay readable).
Violation entry_meta(std::string_view input);
// parse_usage_shard: every counter it accepts is in range, and stays in
// range summed; what parses serializes and parses back the same.
Violation usage_shard(std::string_view input);
// LockHolder::parse: what parses serializes and parses back the same;
// describe() works on anything parsed.
Violation lock_record(std::string_view input);
// parse_extraction_line, then Collector: every path it accepts names a graph
// file in an entry directly under <root>/neuronxcc-<version>/.
Violation trial_line(std::string_view input);
// parse_key: what parses prints back to the same key, and its relative path
// has exactly two plain components (no "..", no "/").
Violation cache_key(std::string_view input);
// bundle::parse_manifest: never throws; a manifest that parses serializes
// and parses back to the same manifest, with no bad entries and the same
// text; every file it lists has a member name that parses back to its entry
// and file.
Violation bundle_manifest(std::string_view input);

// cache::summarize_graph (HLO text or a binary HloModuleProto, from any
// cache entry): never throws; every array's text is its type and
// dimensions; a graph is at distance 0 from itself, and compared with
// itself differs in nothing.
Violation graph_summary(std::string_view input);

[[nodiscard]] const std::vector<Target>& targets();
[[nodiscard]] const Target* find_target(std::string_view name);

} // namespace npc::fuzz
