// compile/masquerade: the real compiler's command line as a frontend gives
// it, what keys it, and the files its input names.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/compile/masquerade.hpp>
#include <npc/util/sha256.hpp>

#include "test_support.hpp"

namespace npc::compile {
namespace {

using Words = std::vector<std::string>;

std::optional<RealCompilerCall> parse_call(const Words& words, std::string* why = nullptr) {
  std::string reason;
  auto call = parse_real_compiler_call(words, reason);
  if (why) *why = reason;
  return call;
}

TEST(RealCompilerCall, TorchNeuronsCommandLine) {
  auto call = parse_call({"compile", "/tmp/x/module.mlir", "--framework", "XLA", "--target", "trn2", "--lnc", "2", "-O2",
                     "--model-type", "transformer", "--auto-cast=none", "--output", "/tmp/x/module.neff"});
  ASSERT_TRUE(call);
  EXPECT_EQ(call->input, "/tmp/x/module.mlir");
  EXPECT_EQ(call->output, "/tmp/x/module.neff");
  EXPECT_EQ(call->key_flags, (Words{"--framework", "XLA", "--target", "trn2", "--lnc", "2", "-O2", "--model-type",
                                    "transformer", "--auto-cast=none"}));
  EXPECT_EQ(with_output(*call, "/c/w/model.neff").back(), "/c/w/model.neff");
  EXPECT_EQ(with_output(*call, "/c/w/model.neff").size(), call->words.size());
}

TEST(RealCompilerCall, WherePathsStayOutOfTheKeyInEveryForm) {
  auto call = parse_call({"compile", "--output=/t/a.neff", "--logfile", "/t/log", "--workdir=/t/w", "g.pb", "-O1",
                     "--internal-foo", "--new-option=3", "--verbose", "info"});
  ASSERT_TRUE(call);
  EXPECT_EQ(call->input, "g.pb");
  EXPECT_EQ(call->output, "/t/a.neff");
  EXPECT_EQ(call->key_flags, (Words{"-O1", "--internal-foo", "--new-option=3", "--verbose", "info"}));
  auto words = with_output(*call, "/w/model.neff");
  EXPECT_EQ(words[1], "--output=/w/model.neff");
  auto short_form = parse_call({"compile", "g.pb", "-o", "/t/b.neff"});
  ASSERT_TRUE(short_form);
  EXPECT_EQ(short_form->output, "/t/b.neff");
  EXPECT_TRUE(short_form->key_flags.empty());
}

TEST(RealCompilerCall, WhatItCannotReadIsHandedOver) {
  std::string why;
  EXPECT_FALSE(parse_call({"--version"}, &why));
  EXPECT_EQ(why, "not a compile");
  EXPECT_FALSE(parse_call({}, &why));
  EXPECT_FALSE(parse_call({"compile", "g.pb", "--no-such-option", "x", "--output", "o"}, &why));
  EXPECT_EQ(why, "the option --no-such-option is not known to take a value or not");
  EXPECT_FALSE(parse_call({"compile", "a.pb", "b.pb", "--output", "o"}, &why));
  EXPECT_EQ(why, "more than one input file");
  EXPECT_FALSE(parse_call({"compile", "--output", "o"}, &why));
  EXPECT_EQ(why, "no input file");
  EXPECT_FALSE(parse_call({"compile", "g.pb"}, &why));
  EXPECT_EQ(why, "no --output");
  EXPECT_FALSE(parse_call({"compile", "g.pb", "--output"}, &why));
  EXPECT_EQ(why, "the option --output has no value");
  EXPECT_FALSE(parse_call({"compile", "g.pb", "--output", "o", "--help"}, &why));
  EXPECT_EQ(why, "asks for help");
}

class InputDigestTest : public test::TempDirTest {};

TEST_F(InputDigestTest, OnlyTheInputsBytesWhenItNamesNoFile) {
  test::write_text(dir() / "g.pb", "HloModule a // see /nonexistent/x.py and / and /2\n");
  auto digest = digest_input(dir() / "g.pb");
  ASSERT_TRUE(digest) << digest.error();
  EXPECT_TRUE(digest->named.empty());
  EXPECT_EQ(digest->sha256, util::sha256_hex("HloModule a // see /nonexistent/x.py and / and /2\n"));
  EXPECT_EQ(digest->key_sha256(), digest->sha256);
}

TEST_F(InputDigestTest, RegularFilesItNamesJoinTheKeyDirectoriesDoNot) {
  const fs::path kernel = dir() / "k" / "attention.py";
  test::write_text(kernel, "v1");
  // Quoted, then ending a sentence, and a directory: the file once, sorted.
  const std::string text = "backend_config=\"" + kernel.string() + "\" also " + kernel.string() + ". dir " +
                           dir().string() + "/k, self " + (dir() / "g.pb").string() + "\n";
  test::write_text(dir() / "g.pb", text);
  auto first = digest_input(dir() / "g.pb");
  ASSERT_TRUE(first) << first.error();
  ASSERT_EQ(first->named.size(), 1u);
  EXPECT_EQ(first->named[0].path, kernel.string());
  EXPECT_EQ(first->named[0].sha256, util::sha256_hex("v1"));
  EXPECT_NE(first->key_sha256(), first->sha256);
  test::write_text(kernel, "v2");
  auto second = digest_input(dir() / "g.pb");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->sha256, first->sha256);
  EXPECT_NE(second->key_sha256(), first->key_sha256());
}

TEST_F(InputDigestTest, APathAcrossTheReadsChunksIsFound) {
  const fs::path kernel = dir() / "kernel.py";
  test::write_text(kernel, "k");
  std::string text((1 << 20) - 5, 'x'); // the path starts 5 bytes before the second chunk
  text += " " + kernel.string() + " ";
  test::write_text(dir() / "g.pb", text);
  auto digest = digest_input(dir() / "g.pb");
  ASSERT_TRUE(digest) << digest.error();
  ASSERT_EQ(digest->named.size(), 1u);
  EXPECT_EQ(digest->named[0].path, kernel.string());
  EXPECT_EQ(digest->size, text.size());
}

} // namespace
} // namespace npc::compile
