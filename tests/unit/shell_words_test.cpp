// util/shell_words: NEURON_CC_FLAGS word splitting and quoting for display.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/util/shell_words.hpp>

namespace npc::util {
namespace {

using Words = std::vector<std::string>;

Words split_ok(std::string_view text) {
  auto words = split_shell_words(text);
  EXPECT_TRUE(words.ok()) << "splitting [" << text << "]: " << (words.ok() ? "" : words.error());
  return words.ok() ? *words : Words{"<failed>"};
}

std::string split_error(std::string_view text) {
  auto words = split_shell_words(text);
  EXPECT_FALSE(words.ok()) << "splitting [" << text << "] should fail";
  return words.ok() ? std::string("<no error>") : words.error();
}

TEST(SplitShellWords, EmptyAndBlankTextGiveNoWords) {
  EXPECT_EQ(split_ok(""), Words{});
  EXPECT_EQ(split_ok(" \t\n\r "), Words{});
}

TEST(SplitShellWords, BlanksSeparateWords) {
  EXPECT_EQ(split_ok("-O2"), (Words{"-O2"}));
  EXPECT_EQ(split_ok("  -O2 \t--target=trn1\n--model-type=transformer\r\n "),
            (Words{"-O2", "--target=trn1", "--model-type=transformer"}));
}

TEST(SplitShellWords, SingleQuotesKeepEverythingLiteral) {
  EXPECT_EQ(split_ok("'a b' c"), (Words{"a b", "c"}));
  // Backslashes, double quotes, $ and backticks mean nothing inside '...'.
  EXPECT_EQ(split_ok(R"('a\"b $x `y` \')"), (Words{R"(a\"b $x `y` \)"}));
  EXPECT_EQ(split_ok("'  '"), (Words{"  "}));
}

TEST(SplitShellWords, DoubleQuotesHonourOnlyFourEscapes) {
  EXPECT_EQ(split_ok(R"("a \" b")"), (Words{R"(a " b)"}));
  EXPECT_EQ(split_ok(R"("a \\ b")"), (Words{R"(a \ b)"}));
  EXPECT_EQ(split_ok(R"("cost \$5")"), (Words{"cost $5"}));
  EXPECT_EQ(split_ok(R"("run \`id\`")"), (Words{"run `id`"}));
  // Any other backslash stays as it is, and so does a single quote.
  EXPECT_EQ(split_ok(R"("a\nb \x it's")"), (Words{R"(a\nb \x it's)"}));
  // $ and backticks are not expanded: nothing here is a shell.
  EXPECT_EQ(split_ok(R"("$HOME $(id) `id`")"), (Words{"$HOME $(id) `id`"}));
}

TEST(SplitShellWords, BackslashOutsideQuotesEscapesTheNextCharacter) {
  EXPECT_EQ(split_ok(R"(a\ b)"), (Words{"a b"}));
  EXPECT_EQ(split_ok(R"(\'c\" \\ \$x)"), (Words{R"('c")", R"(\)", "$x"}));
  EXPECT_EQ(split_ok(R"(x\y)"), (Words{"xy"}));
}

TEST(SplitShellWords, EmptyQuotedWordIsAWord) {
  EXPECT_EQ(split_ok(R"("")"), (Words{""}));
  EXPECT_EQ(split_ok("''"), (Words{""}));
  EXPECT_EQ(split_ok(R"(a "" b '' c)"), (Words{"a", "", "b", "", "c"}));
}

TEST(SplitShellWords, AdjacentQuotedPartsJoinIntoOneWord) {
  EXPECT_EQ(split_ok(R"(--flag="a b"'c d'e)"), (Words{"--flag=a bc de"}));
  EXPECT_EQ(split_ok(R"('it'\''s')"), (Words{"it's"}));
  EXPECT_EQ(split_ok(R"(a'b'"c"\d)"), (Words{"abcd"}));
  EXPECT_EQ(split_ok(R"(""x'')"), (Words{"x"}));
}

TEST(SplitShellWords, UnbalancedSingleQuoteNamesItsPosition) {
  EXPECT_EQ(split_error("ab 'cd"), "unbalanced single quote at position 4");
  EXPECT_EQ(split_error("'"), "unbalanced single quote at position 1");
  // The double quotes inside do not close it.
  EXPECT_EQ(split_error(R"(x 'say "hi")"), "unbalanced single quote at position 3");
}

TEST(SplitShellWords, UnbalancedDoubleQuoteNamesItsPosition) {
  EXPECT_EQ(split_error(R"(-O2 "abc)"), "unbalanced double quote at position 5");
  // An escaped quote does not close it.
  EXPECT_EQ(split_error(R"(x "y \")"), "unbalanced double quote at position 3");
  // A backslash at the very end inside the quotes does not either.
  EXPECT_EQ(split_error(R"("abc\)"), "unbalanced double quote at position 1");
}

TEST(SplitShellWords, TrailingBackslashFails) {
  EXPECT_EQ(split_error(R"(abc\)"), "trailing backslash at position 4");
  EXPECT_EQ(split_error(R"(-O2 \)"), "trailing backslash at position 5");
}

TEST(QuoteShellWord, PlainWordsStayAsTheyAre) {
  EXPECT_EQ(quote_shell_word("-O2"), "-O2");
  EXPECT_EQ(quote_shell_word("--target=trn1"), "--target=trn1");
  EXPECT_EQ(quote_shell_word("/a/b.c,d:e+f@g%h_i"), "/a/b.c,d:e+f@g%h_i");
}

TEST(QuoteShellWord, OtherWordsAreQuoted) {
  EXPECT_EQ(quote_shell_word(""), "''");
  EXPECT_EQ(quote_shell_word("a b"), "'a b'");
  EXPECT_EQ(quote_shell_word("it's"), R"('it'\''s')");
  EXPECT_EQ(quote_shell_word("$(id)"), "'$(id)'");
}

TEST(JoinShellWords, JoinsWithSingleSpaces) {
  EXPECT_EQ(join_shell_words({}), "");
  EXPECT_EQ(join_shell_words({"-O2", "a b", ""}), "-O2 'a b' ''");
}

TEST(JoinShellWords, RoundTripsTrickyWordsThroughSplit) {
  const Words tricky = {"plain",        "",           "a b",           "it's",
                        R"(say "hi")",  "semi;colon", "$(rm -rf /)",   "`id`",
                        R"(back\slash)", "tab\there", "new\nline",     "*glob?[x]",
                        "--opt=a b",    "'",          "\"",            "\\",
                        "a && b | c > d", "#comment", "~user",          "  lead and trail  "};
  for (const auto& word : tricky) {
    EXPECT_EQ(split_ok(quote_shell_word(word)), Words{word}) << "word [" << word << "]";
  }
  EXPECT_EQ(split_ok(join_shell_words(tricky)), tricky);
}

} // namespace
} // namespace npc::util
