// Every fuzz target's body under plain GoogleTest, with any compiler:
//  - every file of its seed corpus (corpus/<target>/) and of the crashes the
//    fuzzers found (regressions/<target>/) is replayed;
//  - 20,000 seeded mutations of the seeds are run (NPC_LONG=1: many
//    more), so the default suite fuzzes a little even where libFuzzer is not
//    available.
// A crash found by `tests/fuzz/run.sh` goes into regressions/<target>/ and is
// checked here from then on.

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include <npc/util/fs.hpp>
#include <npc/util/strings.hpp>

#include "fuzz_targets.hpp"

namespace npc::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file()) files.push_back(it->path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Bytes that matter to these parsers, for the mutator.
const std::string kInteresting = "'\"\\ \t\n=-_:/.+{}[],0123456789()$`@ROOT@\x00\xff";

std::string mutate(std::string s, std::mt19937_64& rng, const std::vector<std::string>& seeds) {
  int steps = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < steps; ++i) {
    switch (rng() % 6) {
    case 0: // insert an interesting byte
      s.insert(s.begin() + static_cast<long>(s.empty() ? 0 : rng() % (s.size() + 1)), kInteresting[rng() % kInteresting.size()]);
      break;
    case 1: // delete a byte
      if (!s.empty()) s.erase(s.begin() + static_cast<long>(rng() % s.size()));
      break;
    case 2: // flip a byte
      if (!s.empty()) s[rng() % s.size()] ^= static_cast<char>(1 << (rng() % 8));
      break;
    case 3: // duplicate a slice
      if (!s.empty()) {
        size_t a = rng() % s.size(), n = 1 + rng() % std::min<size_t>(16, s.size() - a);
        s.insert(a, s.substr(a, n));
      }
      break;
    case 4: // splice another seed
      if (!seeds.empty()) {
        const auto& other = seeds[rng() % seeds.size()];
        size_t at = s.empty() ? 0 : rng() % s.size();
        s = s.substr(0, at) + other.substr(other.empty() ? 0 : rng() % other.size());
      }
      break;
    case 5: // truncate
      if (!s.empty()) s.resize(rng() % s.size());
      break;
    }
  }
  return s;
}

class FuzzRegression : public ::testing::TestWithParam<Target> {};

TEST_P(FuzzRegression, CorpusAndRegressionsHoldTheProperty) {
  const Target& target = GetParam();
  fs::path base = NPC_FUZZ_DIR;
  auto corpus = files_in(base / "corpus" / target.name);
  auto regressions = files_in(base / "regressions" / target.name);
  EXPECT_FALSE(corpus.empty()) << "no seed corpus in " << (base / "corpus" / target.name);
  for (const auto& files : {corpus, regressions})
    for (const auto& file : files) {
      auto violation = target.body(read(file));
      EXPECT_FALSE(violation.has_value()) << file << ": " << *violation;
    }
  std::cout << "[ replayed ] " << target.name << ": " << corpus.size() << " seeds, " << regressions.size()
            << " regressions" << std::endl;
}

TEST_P(FuzzRegression, SeededMutationsHoldTheProperty) {
  const Target& target = GetParam();
  bool long_form = util::is_truthy(util::env("NPC_LONG").value_or(""));
  const int runs = long_form ? 1000000 : 20000;
  std::uint64_t seed = 0;
  if (auto s = util::env("NPC_SEED"); s && !s->empty()) seed = std::stoull(*s);
  else seed = std::random_device{}();
  std::cout << "[ seed     ] " << target.name << " NPC_SEED=" << seed << std::endl;
  std::mt19937_64 rng(seed);
  std::vector<std::string> seeds;
  for (const auto& f : files_in(fs::path(NPC_FUZZ_DIR) / "corpus" / target.name)) seeds.push_back(read(f));
  if (seeds.empty()) seeds.emplace_back();
  int failures = 0;
  for (int i = 0; i < runs && failures < 5; ++i) {
    std::string input = mutate(seeds[rng() % seeds.size()], rng, seeds);
    auto violation = target.body(input);
    if (violation) {
      ++failures;
      std::ostringstream hex;
      for (unsigned char c : input) hex << std::hex << static_cast<int>(c) << ' ';
      ADD_FAILURE() << target.name << ": " << *violation << "\n  input bytes: " << hex.str();
    }
  }
  ::testing::Test::RecordProperty("executions", runs);
  if (auto file = util::env("NPC_RELIABILITY_FIGURES"); file && !file->empty())
    std::ignore = util::append_line(*file, std::string("{\"test\":\"FuzzRegression.") + target.name +
                                               "\",\"form\":\"" + (long_form ? "long" : "short") +
                                               "\",\"fuzz_executions\":" + std::to_string(runs) + "}");
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzRegression, ::testing::ValuesIn(targets()),
                         [](const ::testing::TestParamInfo<Target>& info) { return std::string(info.param.name); });

} // namespace
} // namespace npc::fuzz
