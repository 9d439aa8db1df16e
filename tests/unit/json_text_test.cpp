// util/json_text: strings that are bytes in JSON, losslessly (\udcXX for each
// byte that is not UTF-8), and the files that use it.

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <npc/cache/entry_meta.hpp>
#include <npc/compile/worker_report.hpp>
#include <npc/util/json_text.hpp>

#include "test_support.hpp"

namespace npc::util {
namespace {

using nlohmann::json;

// Every byte 0x00..0xff, once alone and once between valid text.
std::vector<std::string> every_byte() {
  std::vector<std::string> strings;
  for (int b = 0; b < 256; ++b) {
    strings.push_back(std::string(1, static_cast<char>(b)));
    strings.push_back("--flag=\xc3\xa9" + std::string(1, static_cast<char>(b)) + "/x");
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  strings.push_back(all);
  return strings;
}

TEST(JsonText, ValidUtf8IsWrittenAsNlohmannWritesIt) {
  json doc = {{"path", "/cache/\xc3\xa9/\xef\xa3\xbe"}, {"flags", {"-O2", "--x=\"q\"\\", std::string("\0\n", 2)}}};
  EXPECT_EQ(to_json_text(doc), doc.dump());
  EXPECT_EQ(to_json_text(doc, 2), doc.dump(2));
  EXPECT_EQ(to_json_text(doc, 4, JsonAscii::escaped), doc.dump(4, ' ', true));
}

TEST(JsonText, EachInvalidByteIsTheSurrogateEscapePythonWrites) {
  EXPECT_EQ(to_json_text(json::array({"--x=\xff", "a\xc3", "\xe2\x82" "A"})),
            "[\"--x=\\udcff\",\"a\\udcc3\",\"\\udce2\\udc82A\"]");
  EXPECT_EQ(to_json_text(json::array({"\xc3\xa9\xff"}), -1, JsonAscii::escaped), "[\"\\u00e9\\udcff\"]");
  EXPECT_EQ(json_string_text("/c/\x80"), "\"/c/\\udc80\"");
}

TEST(JsonText, EveryByteRoundTripsInValuesAndKeys) {
  for (auto ascii : {JsonAscii::raw, JsonAscii::escaped}) {
    json doc = json::object();
    for (const auto& s : every_byte()) doc[s] = json::array({s, json{{"log", s}}});
    std::string text = to_json_text(doc, 1, ascii);
    auto parsed = parse_json_text(text);
    ASSERT_TRUE(parsed.ok()) << parsed.error();
    EXPECT_EQ(parsed->size(), every_byte().size());
    for (const auto& s : every_byte()) {
      ASSERT_TRUE(parsed->contains(s));
      EXPECT_EQ((*parsed)[s][0].get<std::string>(), s);
      EXPECT_EQ((*parsed)[s][1]["log"].get<std::string>(), s);
    }
  }
}

TEST(JsonText, TheMarkerCharacterItselfSurvives) {
  const std::string marker = "\xef\xa3\xbf";
  for (const std::string& s : {marker, marker + "ff", marker + "--", "\xff" + marker + "\xfe"}) {
    for (auto ascii : {JsonAscii::raw, JsonAscii::escaped}) {
      auto parsed = parse_json_text(to_json_text(json::array({s}), -1, ascii));
      ASSERT_TRUE(parsed.ok()) << parsed.error();
      EXPECT_EQ((*parsed)[0].get<std::string>(), s);
    }
  }
  EXPECT_EQ(to_json_text(json::array({marker + "ff"})), "[\"" + marker + "ff\"]");
}

TEST(JsonText, ReadsWhatPythonAndOlderWritersWrite) {
  auto python = parse_json_text("[\"--x=\\udcff\", \"\\ud83d\\ude00\", \"\\uf8ff\", \"a\\\\udcff\"]");
  ASSERT_TRUE(python.ok()) << python.error();
  EXPECT_EQ(*python, json::array({"--x=\xff", "\xf0\x9f\x98\x80", "\xef\xa3\xbf", "a\\udcff"}));
  auto raw = parse_json_text("{\"p\xff\": \"/c/\xfe\"}");
  ASSERT_TRUE(raw.ok()) << raw.error();
  EXPECT_EQ((*raw)["p\xff"], "/c/\xfe");
}

TEST(JsonText, BadTextIsAFailureNotAnException) {
  for (std::string_view bad : {"", "[", "[\"\\udc00\"]", "[\"\\ud800\"]", "{\"a\":}", "[\"\\u12\"]", "[\"\\"}) {
    auto parsed = parse_json_text(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
  }
}

TEST(JsonText, CompileFlagsKeepEveryByte) {
  auto flags = every_byte();
  std::string text = cache::serialize_compile_flags(flags);
  auto back = cache::parse_compile_flags(text);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, flags);
  EXPECT_EQ(cache::serialize_compile_flags({"-O1", "--x=\xff"}), "[\"-O1\",\"--x=\\udcff\"]\n");
}

class JsonTextFiles : public test::TempDirTest {};

TEST_F(JsonTextFiles, WorkerReportKeepsAPathThatIsNotUtf8) {
  compile::WorkerReport report;
  report.outcome = compile::EntryOutcome::compiled;
  report.error = "compiler said \xff\xfe";
  report.log_path = dir() / "cache\xff" / "model.log";
  auto file = dir() / "result.json";
  ASSERT_TRUE(compile::write_worker_report(file, report).ok());
  auto back = compile::read_worker_report(file);
  ASSERT_TRUE(back.ok()) << back.error();
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ((*back)->log_path, report.log_path);
  EXPECT_EQ((*back)->error, report.error);
}

} // namespace
} // namespace npc::util
