#include "install_support.hpp"

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

#include "files.hpp"
#include "paths.hpp"

namespace npc::test::install {

fs::path build_dir() { return NPC_BUILD_DIR; }

std::vector<std::string> expected_install_files() {
  const std::string doc = "share/doc/neuron-parallel-compile/";
  std::vector<std::string> files = {doc + "README.md", doc + "changelog.gz", doc + "copyright"};
  for (const auto& name : names_in(source_dir() / "docs"))
    if (fs::path(name).extension() == ".md") files.push_back(doc + name);
  for (const auto& name : names_in(source_dir() / "docs" / "images")) files.push_back(doc + "images/" + name);
  for (const auto& program : kPrograms) {
    files.push_back("bin/" + program);
    files.push_back("share/bash-completion/completions/" + program);
    files.push_back("share/man/man1/" + program + ".1.gz");
  }
  // The masquerade directory: neuronx-cc, a link to the wrapper.
  files.push_back(kMasqueradeLink);
  // The wrapper's dynamic build, beside the static one as installed.
  // and lintian's override for the static one.
  if (!wrapper_s3_build().empty()) {
    files.push_back((fs::path("bin") / NPC_WRAPPER_S3_BUILD).lexically_normal().string());
    files.push_back("share/lintian/overrides/neuron-parallel-compile");
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> files_under(const fs::path& root) {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (!entry.is_directory() || entry.is_symlink()) files.push_back(entry.path().lexically_relative(root).string());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> long_options_in(const std::string& text) {
  static const std::regex option("--[A-Za-z][A-Za-z0-9_-]*");
  std::set<std::string> found;
  for (std::sregex_iterator it(text.begin(), text.end(), option), end; it != end; ++it) found.insert(it->str());
  return {found.begin(), found.end()};
}

std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::string roff_words(const std::string& roff) {
  std::string text = std::regex_replace(roff, std::regex(R"(\\f[BIRP])"), "");
  return std::regex_replace(text, std::regex(R"(\\-)"), "-");
}

} // namespace npc::test::install
