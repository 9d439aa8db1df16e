#include "fuzz_targets.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <npc/bundle/manifest.hpp>
#include <npc/cache/entry_meta.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/nearest_graph.hpp>
#include <npc/cache/usage_shard.hpp>
#include <npc/config/neuron_cc_flags.hpp>
#include <npc/launcher/collect.hpp>
#include <npc/launcher/trial.hpp>
#include <npc/storage/lock.hpp>
#include <npc/util/error.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/log.hpp>
#include <npc/util/shell_words.hpp>

namespace npc::fuzz {

namespace fs = std::filesystem;

namespace {

std::string show(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
    else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out + "\"";
}

std::string show(const std::vector<std::string>& words) {
  std::string out = "[";
  for (const auto& w : words) out += (out.size() > 1 ? ", " : "") + show(w);
  return out + "]";
}

const char* kCacheOptions[] = {"--cache_dir", "--no_cache", "--cache_size", "--cache_ttl",
                               "--retry_failed_compilation", "--log_level"};

} // namespace

Violation shell_words(std::string_view input) {
  auto words = util::split_shell_words(input);
  if (!words) {
    if (words.error().find("position ") == std::string::npos) return "a split error names no position: " + words.error();
    return std::nullopt;
  }
  std::string joined = util::join_shell_words(*words);
  auto again = util::split_shell_words(joined);
  if (!again) return "the joined words " + show(joined) + " do not split: " + again.error();
  if (*again != *words) return "split(join(w)) != w: " + show(*words) + " became " + show(*again);
  return std::nullopt;
}

Violation neuron_cc_flags(std::string_view input) {
  config::NeuronCcFlags flags;
  try {
    flags = config::parse_neuron_cc_flags(input);
  } catch (const UsageError& e) {
    if (std::string_view(e.what()).find("NEURON_CC_FLAGS") == std::string_view::npos)
      return std::string("a usage error does not name NEURON_CC_FLAGS: ") + e.what();
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string("parse_neuron_cc_flags threw something other than UsageError: ") + e.what();
  }
  for (const auto& flag : flags.compiler_flags) {
    std::string name = flag.substr(0, flag.find('='));
    for (const char* option : kCacheOptions)
      if (name == option) return "the cache option " + show(flag) + " was left among the compiler flags";
  }
  try {
    auto again = config::split_cache_options(flags.compiler_flags, "again");
    if (again.compiler_flags != flags.compiler_flags)
      return "splitting the compiler flags again changed them: " + show(flags.compiler_flags);
  } catch (const std::exception& e) {
    return std::string("the compiler flags it returned are rejected when split again: ") + e.what() + " in " +
           show(flags.compiler_flags);
  }
  if (flags.cache.cache_dir && flags.cache.cache_dir->empty()) return "an empty --cache_dir was accepted";
  return std::nullopt;
}

Violation compile_flags(std::string_view input) {
  auto flags = cache::parse_compile_flags(input);
  if (!flags) return std::nullopt;
  std::string text = cache::serialize_compile_flags(*flags);
  auto again = cache::parse_compile_flags(text);
  if (!again) return "serialized flags do not parse: " + show(text) + ": " + again.error();
  if (*again != *flags) return "flags changed through serialize/parse: " + show(*flags);
  return std::nullopt;
}

Violation entry_meta(std::string_view input) {
  auto meta = cache::parse_entry_meta(input);
  if (!meta) return std::nullopt;
  std::string text = cache::serialize_entry_meta(*meta);
  auto again = cache::parse_entry_meta(text);
  if (!again) return "a record that was read cannot be read back after it is rewritten: " + show(text) + ": " + again.error();
  std::string text2 = cache::serialize_entry_meta(*again);
  if (text2 != text) return "the record changed through serialize/parse: " + show(text) + " -> " + show(text2);
  return std::nullopt;
}

namespace {

// Whether every counter of `c` is one a shard may hold.
bool in_range(const cache::UsageCounts& c) {
  for (auto count : {c.hits, c.hits_without_time, c.misses, c.failed})
    if (count > cache::kMaxUsageCount) return false;
  for (auto seconds : {c.compile_seconds, c.saved_seconds})
    if (!(seconds >= 0 && seconds <= cache::kMaxUsageSeconds)) return false;
  return c.hits_without_time <= c.hits;
}

} // namespace

Violation usage_shard(std::string_view input) {
  auto shard = cache::parse_usage_shard(input);
  if (!shard) return std::nullopt;
  if (shard->zeroed_unix < 0 || shard->zeroed_unix > cache::kMaxZeroedUnix)
    return "a shard zeroed at " + std::to_string(shard->zeroed_unix) + " was accepted: " + show(input);
  cache::UsageCounts doubled;
  for (const auto& [name, counts] : shard->by_program) {
    if (!in_range(counts)) return "a shard with counters out of range was accepted: " + show(input);
    doubled += counts;
    doubled += counts;
    if (!in_range(doubled)) return "a sum went out of range: " + show(input);
  }
  std::string text = cache::serialize_usage_shard(*shard);
  auto again = cache::parse_usage_shard(text);
  if (!again)
    return "a shard that was read cannot be read back after it is rewritten: " + show(text) + ": " + again.error();
  std::string text2 = cache::serialize_usage_shard(*again);
  if (text2 != text) return "the shard changed through serialize/parse: " + show(text) + " -> " + show(text2);
  return std::nullopt;
}

// Our lock record (JSON), or an older release's owner-facts line.
Violation lock_record(std::string_view input) {
  if (auto record = storage::LockRecord::parse(input); record && !record->token.empty()) {
    std::string text = record->serialize();
    auto again = storage::LockRecord::parse(text);
    if (!again) return "a serialized lock record does not parse: " + show(text);
    if (again->owner != record->owner || again->token != record->token || again->expires_unix != record->expires_unix)
      return "the lock record changed through serialize/parse: " + show(text) + " -> " + show(again->serialize());
  }
  auto holder = util::LockHolder::parse(input);
  if (!holder) return std::nullopt;
  if (holder->pid <= 0) return "a lock record with pid " + std::to_string(holder->pid) + " was accepted";
  std::ignore = holder->describe();
  std::string line = holder->serialize();
  auto again = util::LockHolder::parse(line);
  if (!again) return "a serialized lock record does not parse: " + show(line);
  if (again->pid != holder->pid || again->host != holder->host || again->start_unix != holder->start_unix ||
      again->tool != holder->tool)
    return "the lock record changed through serialize/parse: " + show(line) + " -> " + show(again->serialize());
  return std::nullopt;
}

namespace {

constexpr const char* kVersion = "2.14.213.0+standin";

// A small cache with one real entry, made once per process and removed at
// exit (by a destructor: an atexit handler registered while the static was
// being built would run after it is destroyed).
struct FuzzCache {
  fs::path base, root;
  FuzzCache() {
    std::string pattern = (fs::temp_directory_path() / "npc-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    base = pattern;
    fs::path r = base / "neuron-compile-cache";
    fs::path version = r / (std::string("neuronxcc-") + kVersion);
    fs::path entry = version / "MODULE_0123456789abcdef0123+01234567";
    fs::create_directories(entry);
    std::ofstream(entry / "model.hlo_module.pb") << "HloModule fuzz\n";
    fs::create_directories(base / "outside" / "MODULE_0123456789abcdef0123+01234567");
    std::ofstream(base / "outside" / "model.hlo_module.pb") << "evil\n";
    fs::create_directory_symlink(base / "outside", version / "MODULE_1111111111111111aaaa+bbbbbbbb");
    root = fs::weakly_canonical(r);
  }
  ~FuzzCache() {
    std::error_code ec;
    fs::remove_all(base, ec);
  }
};

const fs::path& fuzz_root() {
  static const FuzzCache cache;
  return cache.root;
}

} // namespace

Violation trial_line(std::string_view input) {
  static bool quiet = (util::set_log_level(util::LogLevel::error), true);
  (void)quiet;
  const fs::path& root = fuzz_root();
  // The input is a trial output line; a "@ROOT@" in it stands for the cache
  // root so that the fuzzer can reach inside it.
  std::string line(input);
  for (auto at = line.find("@ROOT@"); at != std::string::npos; at = line.find("@ROOT@", at))
    line.replace(at, 6, root.string());
  std::string path = launcher::parse_extraction_line(line);
  if (path.size() > line.size()) return "the extracted path is longer than its line";
  launcher::Collector collector(root, kVersion);
  collector.add_graph_path(path, "fuzz");
  collector.add_graph_path(line, "fuzz (a whole line as a path)");
  for (const auto& entry : collector.entries()) {
    if (entry.parent_path().parent_path() != root)
      return "accepted an entry outside <root>/neuronxcc-<v>/: " + entry.string() + " from " + show(line);
    if (entry.parent_path().filename() != std::string("neuronxcc-") + kVersion)
      return "accepted an entry of another version: " + entry.string();
    auto key = cache::parse_key(entry.string());
    if (!key) return "accepted a directory that is no entry: " + entry.string();
    std::error_code ec;
    fs::path real = fs::weakly_canonical(entry / "model.hlo_module.pb", ec);
    if (real.parent_path() != entry) return "accepted an entry whose graph resolves elsewhere: " + real.string();
  }
  return std::nullopt;
}

Violation cache_key(std::string_view input) {
  auto key = cache::parse_key(input);
  if (!key) return std::nullopt;
  auto again = cache::parse_key(key->str());
  if (!again || !(*again == *key)) return "a parsed key does not print back to itself: " + show(input) + " -> " + key->str();
  if (!cache::valid_compiler_version(key->compiler_version)) return "an invalid version was accepted: " + show(input);
  fs::path rel = key->relative_path();
  int parts = 0;
  for (const auto& part : rel) {
    ++parts;
    if (part == ".." || part == "." || part.empty()) return "a key with a path component " + part.string();
  }
  if (parts != 2 || rel.is_absolute()) return "a key whose relative path is not two plain components: " + rel.string();
  return std::nullopt;
}

Violation bundle_manifest(std::string_view input) {
  try {
    auto parsed = bundle::parse_manifest(input);
    if (!parsed) {
      if (parsed.error().empty()) return "a manifest was refused with no reason";
      return std::nullopt;
    }
    for (const auto& bad : parsed->bad)
      if (bad.reason.empty()) return "a bad entry " + show(bad.key) + " has no reason";
    const bundle::BundleManifest& manifest = parsed->manifest;
    std::string text = bundle::serialize_manifest(manifest);
    auto again = bundle::parse_manifest(text);
    if (!again) return "a serialized manifest does not parse: " + show(text) + ": " + again.error();
    if (!again->bad.empty())
      return "a serialized manifest has a bad entry " + show(again->bad.front().key) + ": " + again->bad.front().reason;
    if (!(again->manifest == manifest)) return "the manifest changed through serialize/parse: " + show(text);
    std::string text2 = bundle::serialize_manifest(again->manifest);
    if (text2 != text) return "the manifest text changed through parse/serialize: " + show(text) + " -> " + show(text2);
    // The importer finds an entry's members by these names.
    for (const auto& entry : manifest.entries)
      for (const auto& [file, record] : entry.files) {
        std::string name = bundle::member_name(entry.key, file);
        auto member = bundle::parse_member_name(name);
        if (!member || !(member->key == entry.key) || member->file != file)
          return "the member name " + show(name) + " of an accepted entry does not parse back to it";
      }
  } catch (const std::exception& e) {
    return std::string("reading a manifest threw: ") + e.what();
  }
  return std::nullopt;
}

Violation graph_summary(std::string_view input) {
  try {
    auto summary = cache::summarize_graph(input);
    if (!summary) return summary.error().empty() ? Violation("a graph was refused with no reason") : std::nullopt;
    for (const auto* list : {&summary->parameters, &summary->results})
      for (const auto& shape : *list) {
        if (shape.type == "tuple") continue;
        std::string text = shape.type + "[";
        for (std::size_t i = 0; i < shape.dims.size(); ++i) text += (i == 0 ? "" : ",") + std::to_string(shape.dims[i]);
        if (text + "]" != shape.text) return "an array's text is not its type and dimensions: " + show(shape.text);
      }
    if (cache::graph_distance(*summary, *summary) != 0) return "a graph is not at distance 0 from itself";
    auto self = cache::compare_graphs(*summary, *summary);
    if (self.differences != std::vector<std::string>{"the same parameters, results and instruction count"})
      return "a graph compared with itself differs: " + show(self.differences.front());
  } catch (const std::exception& e) {
    return std::string("reading a graph threw: ") + e.what();
  }
  return std::nullopt;
}

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"shell_words", "util::split_shell_words", shell_words},
      {"neuron_cc_flags", "config::parse_neuron_cc_flags", neuron_cc_flags},
      {"compile_flags", "cache::parse_compile_flags", compile_flags},
      {"entry_meta", "cache::parse_entry_meta", entry_meta},
      {"usage_shard", "cache::parse_usage_shard", usage_shard},
      {"lock_record", "storage::LockRecord::parse, util::LockHolder::parse", lock_record},
      {"trial_line", "launcher::parse_extraction_line + Collector", trial_line},
      {"cache_key", "cache::parse_key", cache_key},
      {"bundle_manifest", "bundle::parse_manifest", bundle_manifest},
      {"graph_summary", "cache::summarize_graph", graph_summary},
  };
  return all;
}

const Target* find_target(std::string_view name) {
  for (const auto& t : targets())
    if (name == t.name) return &t;
  return nullptr;
}

} // namespace npc::fuzz
