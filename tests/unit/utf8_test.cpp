// util/utf8: sequence lengths and what a terminal is shown.

#include <gtest/gtest.h>

#include <npc/util/utf8.hpp>

namespace npc::util {
namespace {

TEST(Utf8, SequenceLengths) {
  EXPECT_EQ(utf8_sequence_length("a", 0), 1U);
  EXPECT_EQ(utf8_sequence_length("\xC3\xA9", 0), 2U);         // é
  EXPECT_EQ(utf8_sequence_length("\xE2\x82\xAC", 0), 3U);     // €
  EXPECT_EQ(utf8_sequence_length("\xF0\x9F\x98\x80", 0), 4U); // 😀
  EXPECT_EQ(utf8_sequence_length("\xC0\xAF", 0), 0U);         // overlong '/'
  EXPECT_EQ(utf8_sequence_length("\xED\xA0\x80", 0), 0U);     // a surrogate
  EXPECT_EQ(utf8_sequence_length("\xC3", 0), 0U);             // cut short
  EXPECT_EQ(utf8_sequence_length("\xFF", 0), 0U);
}

TEST(Utf8, PrintableTextEscapesWhatATerminalWouldObey) {
  EXPECT_EQ(printable_text("plain /cache/neuronxcc-2.15/MODULE_1+ab"), "plain /cache/neuronxcc-2.15/MODULE_1+ab");
  EXPECT_EQ(printable_text("caf\xC3\xA9 \xE2\x82\xAC"), "caf\xC3\xA9 \xE2\x82\xAC");
  EXPECT_EQ(printable_text("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
  EXPECT_EQ(printable_text("line\nerror: forged\r\tx"), "line\\nerror: forged\\r\\tx");
  EXPECT_EQ(printable_text(std::string("nul\0bel\a del\x7f", 13)), "nul\\x00bel\\x07 del\\x7f");
  EXPECT_EQ(printable_text("\xC2\x9B" "2J"), "\\xc2\\x9b2J"); // C1 CSI
  EXPECT_EQ(printable_text("\xC2\xA0nbsp"), "\xC2\xA0nbsp"); // U+00A0 is printable
  EXPECT_EQ(printable_text("bad \xFF\xC3 end"), "bad \\xff\\xc3 end");
  EXPECT_EQ(printable_text("back\\slash"), "back\\slash");
  EXPECT_EQ(printable_text(""), "");
  EXPECT_EQ(printable_text("error\n  | a\tb\r\x1b[K", LineBreaks::keep), "error\n  | a\tb\\r\\x1b[K");
}

} // namespace
} // namespace npc::util
