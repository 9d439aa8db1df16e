// neuron_cache explain: which entries of the cache hold a graph, and why a
// run with the current settings (or a given neuronx-cc command line) would
// miss them (cache/explain.hpp).

#include <npc/cli/cache_commands.hpp>

#include <iostream>

#include <spdlog/spdlog.h>

#include <npc/cache/explain.hpp>
#include <npc/cache/explain_target.hpp>
#include <npc/compile/compiler.hpp>
#include <npc/compile/masquerade.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>

namespace npc::cli {

namespace {

using nlohmann::json;

// The compiler's version as the wrapper finds it; nullopt (with the reason
// said) when it cannot be found, and then only the flags are compared.
std::optional<std::string> current_compiler_version(const cache::Cache& cache,
                                                    const std::optional<std::string>& compiler) {
  try {
    fs::path path = compile::locate_compiler(compiler);
    std::error_code ec;
    // Looking must not create the cache's private folder.
    fs::path memo = fs::is_directory(cache.private_dir(), ec) ? cache.private_dir() / cache::kCompilerVersionsDir
                                                              : fs::path();
    return compile::compiler_version(path, memo);
  } catch (const EnvironmentError& e) {
    spdlog::warn("{}; comparing flags only", e.what());
    return std::nullopt;
  }
}

std::string joined(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : std::string(separator)) + part;
  return out;
}

std::string words_or_none(const std::vector<std::string>& words) {
  return words.empty() ? std::string("(none)") : joined(words, " ");
}

// "same flags" / "flags added: -O2; flags removed: -O1" / "same flags, different order".
std::string flags_words(const cache::FlagsDiff& diff) {
  if (diff.same) return "same flags";
  if (diff.order_only()) return "same flags, different order";
  std::vector<std::string> parts;
  if (!diff.added.empty()) parts.push_back("flags added: " + joined(diff.added, " "));
  if (!diff.removed.empty()) parts.push_back("flags removed: " + joined(diff.removed, " "));
  return joined(parts, "; ");
}

// "same flags" / "flags added: -O2; flags removed: -O1" / "compiler version X, current Y"; for an entry
// the masquerade made, the command line that keys it instead of NEURON_CC_FLAGS.
std::string differences(const cache::GraphMatch& m, const cache::CurrentSettings& current) {
  std::vector<std::string> parts;
  const bool by_command_line = m.flags_from == cache::FlagsOrigin::compiler_command_line;
  if (by_command_line) {
    std::string made = "made by neuronx-cc through the masquerade, keyed by its command line (not NEURON_CC_FLAGS)";
    if (m.flags && !current.command_line_flags) made += ": flags " + words_or_none(*m.flags);
    parts.push_back(made);
  }
  if (!m.flags) {
    parts.emplace_back("flags unknown (compile_flags.json unreadable)");
  } else if (!by_command_line) {
    parts.push_back(flags_words(m.flags_diff));
  } else if (current.command_line_flags) {
    parts.push_back("against the given command line: " + flags_words(m.flags_diff));
  }
  if (m.named_files_changed) parts.emplace_back("the files the graph names have changed since (their bytes key it)");
  const std::string& version = m.entry.key.compiler_version;
  if (!current.compiler_version) parts.push_back("compiler version " + version + ", current unknown");
  else if (*m.same_version) parts.emplace_back("same compiler version");
  else parts.push_back("compiler version " + version + ", current " + *current.compiler_version);
  return joined(parts, "; ");
}

std::string verdict_line(const cache::Explanation& x) {
  std::string run = "a run with the current flags (compiler version unknown)";
  if (x.current_key && x.current_key_source == cache::KeySource::entry)
    run = "a run with the current flags and compiler (key " + x.current_key->str() + ")";
  else if (x.current_key)
    run = "a run with the current flags and compiler (key " + x.current_key->str() +
          " as neuron_cc_wrapper compile names it; the framework names a graph by a hash of its own that cannot "
          "be computed from the bytes: give its entry to see that key)";
  switch (x.verdict) {
  case cache::Verdict::hit:
    return run + " will hit: entry " + x.matches[*x.deciding].entry.key.str() + " is done";
  case cache::Verdict::not_done: {
    const auto& e = x.matches[*x.deciding].entry;
    return run + " will not hit: entry " + e.key.str() + " has this graph with these flags but is " +
           std::string(cache::to_string(e.state));
  }
  case cache::Verdict::miss:
    break;
  }
  return run + " will miss: no entry has this graph with these flags" +
         (x.current_key ? " and this version" : "");
}

// What a neuronx-cc command line through the masquerade would do: the given
// one, or the same command line as an entry the masquerade made.
std::string command_line_verdict_line(const cache::Explanation& x) {
  const cache::Judgement& j = *x.command_line;
  const bool given = x.current.command_line_flags.has_value();
  if (given) {
    std::string run = "the given neuronx-cc command line, through the masquerade";
    if (x.command_line_key) run += " (key " + x.command_line_key->str() + ")";
    switch (j.verdict) {
    case cache::Verdict::hit: return run + ", will hit: entry " + x.matches[*j.deciding].entry.key.str() + " is done";
    case cache::Verdict::not_done: {
      const auto& e = x.matches[*j.deciding].entry;
      return run + ", will not hit: entry " + e.key.str() + " has this graph with these flags but is " +
             std::string(cache::to_string(e.state));
    }
    case cache::Verdict::miss: break;
    }
    return run + ", will miss: no entry the masquerade made has this graph with these flags" +
           (x.current.compiler_version ? " and this version" : "");
  }
  const std::string compare = " (to compare another command line, give it after --: neuron_cache explain TARGET -- "
                              "neuronx-cc compile GRAPH FLAGS... --output FILE)";
  switch (j.verdict) {
  case cache::Verdict::hit:
    return "the same neuronx-cc command line as entry " + x.matches[*j.deciding].entry.key.str() +
           "'s, through the masquerade, will hit: it is done" + compare;
  case cache::Verdict::not_done: {
    const auto& e = x.matches[*j.deciding].entry;
    return "the same neuronx-cc command line as entry " + e.key.str() + "'s, through the masquerade, will not hit: " +
           "it is " + std::string(cache::to_string(e.state)) + compare;
  }
  case cache::Verdict::miss: break;
  }
  return "a neuronx-cc command line through the masquerade will miss: no entry it made has this graph for the "
         "current compiler version and the files the graph names as they are now" + compare;
}

std::string_view verdict_name(cache::Verdict verdict) {
  switch (verdict) {
  case cache::Verdict::hit: return "hit";
  case cache::Verdict::not_done: return "not_done";
  case cache::Verdict::miss: return "miss";
  }
  return "miss";
}

std::string_view flags_from_name(cache::FlagsOrigin origin) {
  return origin == cache::FlagsOrigin::compiler_command_line ? "neuronx-cc command line" : "NEURON_CC_FLAGS";
}

json explain_json(const cache::Explanation& x) {
  json matches = json::array();
  for (const auto& m : x.matches) {
    matches.push_back({{"key", m.entry.key.str()},
                       {"path", m.entry.dir.string()},
                       {"state", cache::to_string(m.entry.state)},
                       {"version", m.entry.key.compiler_version},
                       {"flags_from", flags_from_name(m.flags_from)},
                       {"flags", m.flags ? json(*m.flags) : json(nullptr)},
                       {"flags_added", m.flags_diff.added},
                       {"flags_removed", m.flags_diff.removed},
                       {"same_flags", m.flags ? json(m.flags_diff.same) : json(nullptr)},
                       {"same_order", m.flags ? json(!m.flags_diff.order_only()) : json(nullptr)},
                       {"same_version", m.same_version ? json(*m.same_version) : json(nullptr)},
                       {"named_files_changed", m.named_files_changed}});
  }
  json doc = {{"target", x.graph.string()},
              {"graph_bytes", x.graph_bytes},
              {"current",
               {{"version", x.current.compiler_version ? json(*x.current.compiler_version) : json(nullptr)},
                {"flags", x.current.flags},
                {"key", x.current_key ? json(x.current_key->str()) : json(nullptr)},
                {"key_source", x.current_key_source == cache::KeySource::entry ? "entry" : "neuron_cc_wrapper"}}},
              {"matches", matches},
              {"outcome", verdict_name(x.verdict)},
              {"verdict", verdict_line(x)}};
  if (x.command_line) {
    const auto& deciding = x.command_line->deciding;
    doc["command_line"] = {
        {"flags", x.current.command_line_flags ? json(*x.current.command_line_flags) : json(nullptr)},
        {"key", x.command_line_key ? json(x.command_line_key->str()) : json(nullptr)},
        {"outcome", verdict_name(x.command_line->verdict)},
        {"entry", deciding ? json(x.matches[*deciding].entry.key.str()) : json(nullptr)},
        {"verdict", command_line_verdict_line(x)}};
  }
  return doc;
}

int print_explanation(const cache::Explanation& x, bool as_json) {
  const cache::CurrentSettings& current = x.current;
  if (as_json) {
    print_json(explain_json(x));
    return 0;
  }
  std::cout << "graph: " << x.graph.string() << " (" << x.graph_bytes << " bytes)\n"
            << "current: compiler version " << current.compiler_version.value_or("unknown") << ", flags "
            << words_or_none(current.flags) << '\n';
  if (current.command_line_flags)
    std::cout << "given neuronx-cc command line: flags " << words_or_none(*current.command_line_flags) << '\n';
  std::cout << x.matches.size() << " entr" << (x.matches.size() == 1 ? "y has" : "ies have") << " this graph"
            << (x.matches.empty() ? "" : ":") << '\n';
  for (const auto& m : x.matches)
    std::cout << "  " << m.entry.key.str() << ": " << cache::to_string(m.entry.state) << "; "
              << differences(m, current) << '\n';
  std::cout << verdict_line(x) << '\n';
  if (x.command_line) std::cout << command_line_verdict_line(x) << '\n';
  return 0;
}

// The words after `explain TARGET --`: a neuronx-cc command line, as a
// frontend runs it (the program's name first, or not), read as the
// masquerade reads it.
std::vector<std::string> command_line_flags(std::vector<std::string> words) {
  if (!words.empty() && words.front() != "compile" && fs::path(words.front()).filename() == "neuronx-cc")
    words.erase(words.begin());
  std::string why;
  auto call = compile::parse_real_compiler_call(words, why);
  if (!call)
    throw UsageError("explain: the command line after -- is not one the masquerade caches (" + why +
                     "): give it as the frontend runs it, neuronx-cc compile GRAPH FLAGS... --output FILE");
  return call->key_flags;
}

// The graph part of the key the masquerade would give `graph` now (with the
// files it names); nullopt, with the reason said, when it cannot be read.
std::optional<std::string> command_line_graph_hash(const fs::path& graph) {
  auto digest = compile::digest_input(graph);
  if (!digest) {
    spdlog::warn("cannot read {} as the masquerade would ({}); not comparing the files it names", graph.string(),
                 digest.error());
    return std::nullopt;
  }
  return cache::make_key(digest->key_sha256(), {}, "").graph_hash;
}

} // namespace

// The entries are the tiers' common cache (over `connections`); the
// directory's private folder remembers compiler versions (a shared cache's
// mirror).
int cmd_explain(cache::Tiers& tiers, std::size_t connections, const Settings& settings,
                const std::string& target, const std::optional<std::string>& compiler,
                const std::vector<std::string>& command_line, bool as_json) {
  const cache::Cache& cache = tiers.common(connections);
  const cache::Cache& local = tiers.directory();
  std::optional<std::vector<std::string>> given_flags;
  if (!command_line.empty()) given_flags = command_line_flags(command_line);
  std::error_code ec;
  if (!tiers.shared() && !fs::is_directory(cache.root(), ec))
    throw EnvironmentError("cache " + cache.root().string() +
                           " is not a directory (name the cache with --cache_dir or NEURON_CC_FLAGS)");
  util::TempDir scratch(fs::temp_directory_path(), "npc-explain-");
  auto graph = cache::find_target_graph(cache, target, scratch.path());
  if (!graph) {
    const std::string url_form =
        tiers.shared() ? ", " + cache.describe() + "/neuronxcc-<version>/MODULE_<hash>+<hash>" : "";
    throw UsageError("explain: '" + target + "' is no graph file, entry directory or key of the cache " +
                     cache.describe() + " (give a model.hlo_module.pb, an entry directory, " +
                     "neuronxcc-<version>/MODULE_<hash>+<hash>" + url_form +
                     ", or MODULE_<hash>+<hash> as neuron_cache ls prints it)");
  }
  cache::CurrentSettings current{current_compiler_version(local, compiler), settings.compiler_flags, given_flags,
                                 command_line_graph_hash(graph->file)};
  auto x = cache::explain_in_cache(cache, graph->file, current, scratch.path());
  if (!x) throw UsageError("explain: cannot read the graph " + graph->name + ": " + x.error());
  x->graph = graph->name; // named as users know it, not by its download
  return print_explanation(*x, as_json);
}

} // namespace npc::cli
