#include <npc/util/bash_completion.hpp>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <vector>

#include <npc/util/error.hpp>

namespace npc::util {

namespace {

enum class ValueKind { word, file, directory };

// Every name here is pasted into the script unquoted or between double
// quotes: anything but these characters is left out rather than escaped.
bool safe_word(const std::string& word) {
  return !word.empty() && std::all_of(word.begin(), word.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '+';
  });
}

// The values an option takes when its type name lists them as argparse
// shows choices, "{a,b,c}" (what --help shows too); none otherwise.
std::vector<std::string> choices_of(const std::string& hint) {
  std::vector<std::string> words;
  if (hint.size() < 3 || hint.front() != '{' || hint.back() != '}') return words;
  std::string word;
  for (char c : hint.substr(1, hint.size() - 2) + ",") {
    if (c != ',') {
      word += c;
      continue;
    }
    if (!safe_word(word)) return {}; // pasted unquoted below: all or nothing
    words.push_back(word);
    word.clear();
  }
  return words;
}

ValueKind kind_of(std::string hint) {
  std::transform(hint.begin(), hint.end(), hint.begin(), [](unsigned char c) { return std::toupper(c); });
  if (hint.find("DIR") != std::string::npos) return ValueKind::directory;
  for (const char* file_word : {"FILE", "PATH", "NEFF", ".JSON"})
    if (hint.find(file_word) != std::string::npos) return ValueKind::file;
  return ValueKind::word;
}

// One place on the command line: the program itself or one of its
// subcommands, with what may be written there.
struct Level {
  std::string path; // subcommand names joined by spaces; "" for the program
  std::vector<std::string> options;
  std::vector<std::string> value_options; // take the next word
  std::vector<std::string> file_options, directory_options;
  std::vector<std::pair<std::string, std::vector<std::string>>> choice_options; // an option and its values
  std::vector<std::string> subcommands;
  std::vector<ValueKind> positionals;
};

void add_options(const CLI::App& app, Level& level) {
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_group().empty()) continue; // hidden
    if (option->get_lnames().empty() && option->get_snames().empty()) {
      level.positionals.push_back(kind_of(option->get_type_name() + " " + option->get_name()));
      continue;
    }
    std::vector<std::string> names;
    for (const auto& n : option->get_lnames()) names.push_back("--" + n);
    for (const auto& n : option->get_snames()) names.push_back("-" + n);
    for (const auto& name : names) {
      if (!safe_word(name)) continue;
      level.options.push_back(name);
      if (option->get_expected_max() <= 0) continue;
      level.value_options.push_back(name);
      if (auto choices = choices_of(option->get_type_name()); !choices.empty()) {
        level.choice_options.emplace_back(name, std::move(choices));
        continue;
      }
      switch (kind_of(option->get_type_name())) {
      case ValueKind::file: level.file_options.push_back(name); break;
      case ValueKind::directory: level.directory_options.push_back(name); break;
      case ValueKind::word: break;
      }
    }
  }
  // Option groups are nameless subcommands whose options are the app's own.
  for (const CLI::App* group : app.get_subcommands([](const CLI::App* s) { return s->get_name().empty(); }))
    add_options(*group, level);
}

// Where CLI11 lets a subcommand's line carry its parent's options too
// (fallthrough), the completion offers them as well.
void add_levels(const CLI::App& app, const std::string& path, const Level* parent, std::vector<Level>& levels) {
  Level level;
  level.path = path;
  add_options(app, level);
  if (parent != nullptr && app.get_fallthrough()) {
    auto append = [](std::vector<std::string>& to, const std::vector<std::string>& from) {
      for (const auto& w : from)
        if (std::find(to.begin(), to.end(), w) == to.end()) to.push_back(w);
    };
    append(level.options, parent->options);
    append(level.value_options, parent->value_options);
    append(level.file_options, parent->file_options);
    append(level.directory_options, parent->directory_options);
    for (const auto& choice : parent->choice_options) level.choice_options.push_back(choice);
  }
  auto subcommands = app.get_subcommands([](const CLI::App* s) { return !s->get_name().empty(); });
  for (const CLI::App* sub : subcommands)
    if (safe_word(sub->get_name())) level.subcommands.push_back(sub->get_name());
  levels.push_back(level);
  const Level this_level = level; // levels may reallocate below
  for (const CLI::App* sub : subcommands)
    if (safe_word(sub->get_name()))
      add_levels(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), &this_level, levels);
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// `"ctx|--a"|"ctx|--b"`: case patterns matching "$ctx|$word".
std::string patterns(const std::string& path, const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "\"" : "|\"") + path + "|" + w + "\"";
  return out;
}

std::string function_name(const std::string& program) {
  std::string name = "_npc_complete_";
  for (unsigned char c : program) name += std::isalnum(c) != 0 ? static_cast<char>(c) : '_';
  return name;
}

constexpr const char* kFiles = "compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")";
constexpr const char* kDirectories =
    "compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -d -- \"$cur\")";

} // namespace

std::string bash_completion_script(const CLI::App& app, AfterOptions after) {
  std::vector<Level> levels;
  add_levels(app, "", nullptr, levels);
  const std::string program = app.get_name();
  const std::string function = function_name(program);
  std::string s;
  s += "# bash completion for " + program + "\n";
  s += "# Made by `" + program + " " + std::string(kPrintBashCompletion) + "` from its command line.\n\n";
  s += function + "()\n{\n";
  s += "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n";
  s += "    local ctx=\"\" skip=0 rest=0 start=0 i w\n";
  // COMP_WORDBREAKS splits --opt=value into three words.
  s += "    if [[ $cur == \"=\" ]]; then cur=\"\"; elif [[ $prev == \"=\" && COMP_CWORD -ge 2 ]]; then\n";
  s += "        prev=${COMP_WORDS[COMP_CWORD-2]}\n    fi\n";
  s += "    for ((i = 1; i < COMP_CWORD; i++)); do\n";
  s += "        w=${COMP_WORDS[i]}\n";
  s += "        if [[ $w == \"=\" ]]; then skip=1; continue; fi\n";
  s += "        if ((skip)); then skip=0; continue; fi\n";
  s += "        if [[ $w == \"--\" ]]; then rest=1; start=$((i + 1)); break; fi\n";
  s += "        case \"$ctx|$w\" in\n";
  for (const auto& level : levels) {
    if (!level.value_options.empty()) s += "        " + patterns(level.path, level.value_options) + ") skip=1 ;;\n";
    for (const auto& sub : level.subcommands) {
      std::string next = level.path.empty() ? sub : level.path + " " + sub;
      s += "        \"" + level.path + "|" + sub + "\") ctx=\"" + next + "\" ;;\n";
    }
  }
  if (after == AfterOptions::command)
    s += "        *) if [[ -z $ctx && $w != -* ]]; then rest=1; start=$i; break; fi ;;\n";
  s += "        esac\n    done\n";

  s += "    if ((rest)); then\n";
  if (after == AfterOptions::command) {
    s += "        if ((start == COMP_CWORD)); then\n";
    s += "            mapfile -t COMPREPLY < <(compgen -c -- \"$cur\")\n";
    s += "        elif declare -F _command_offset >/dev/null; then\n";
    s += "            _command_offset \"$start\"\n";
    s += "        else\n            " + std::string(kFiles) + "\n        fi\n";
  } else {
    s += "        " + std::string(kFiles) + "\n";
  }
  s += "        return 0\n    fi\n";

  s += "    case \"$ctx|$prev\" in\n";
  for (const auto& level : levels) {
    for (const auto& [option, values] : level.choice_options)
      s += "    \"" + level.path + "|" + option + "\")\n        mapfile -t COMPREPLY < <(compgen -W \"" + joined(values) +
           "\" -- \"$cur\")\n        return 0 ;;\n";
    if (!level.file_options.empty()) s += "    " + patterns(level.path, level.file_options) + ")\n        " + kFiles + "\n        return 0 ;;\n";
    if (!level.directory_options.empty())
      s += "    " + patterns(level.path, level.directory_options) + ")\n        " + kDirectories + "\n        return 0 ;;\n";
    // A value we cannot guess: offer nothing rather than option names.
    if (!level.value_options.empty())
      s += "    " + patterns(level.path, level.value_options) + ")\n        COMPREPLY=()\n        return 0 ;;\n";
  }
  s += "    esac\n";

  s += "    if [[ $cur == -* ]]; then\n        case \"$ctx\" in\n";
  for (const auto& level : levels)
    s += "        \"" + level.path + "\") mapfile -t COMPREPLY < <(compgen -W \"" + joined(level.options) +
         "\" -- \"$cur\") ;;\n";
  s += "        esac\n        return 0\n    fi\n";

  s += "    case \"$ctx\" in\n";
  for (const auto& level : levels) {
    std::string body;
    if (!level.subcommands.empty())
      body += "mapfile -t COMPREPLY < <(compgen -W \"" + joined(level.subcommands) + "\" -- \"$cur\")";
    else if (level.path.empty() && after == AfterOptions::command)
      body += "mapfile -t COMPREPLY < <(compgen -c -- \"$cur\")";
    else if (std::count(level.positionals.begin(), level.positionals.end(), ValueKind::directory) > 0)
      body += kDirectories;
    else if (std::count(level.positionals.begin(), level.positionals.end(), ValueKind::file) > 0)
      body += kFiles;
    if (!body.empty()) s += "    \"" + level.path + "\") " + body + " ;;\n";
  }
  s += "    esac\n    return 0\n}\n";
  s += "complete -F " + function + " " + program + "\n";
  return s;
}

void print_bash_completion_if_asked(const CLI::App& app, int argc, char** argv, AfterOptions after) {
  if (argc != 2 || argv[1] != kPrintBashCompletion) return;
  std::cout << bash_completion_script(app, after) << std::flush;
  throw Error("", ExitCode::success);
}

} // namespace npc::util
