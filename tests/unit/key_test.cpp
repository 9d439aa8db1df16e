// cache/key: golden keys (torch-neuronx's MD5 flags part, and the legacy
// SHA-256 one still read), parsing keys back, module names given by a
// caller, and a key that does not depend on where the cache or the graph is.
//
// Every expected hash below was computed independently with sha256sum and
// md5sum:
//   printf 'HloModule golden_test\n' | sha256sum
//     -> 18bb2e5f8f5893902018d591a4c8f2fd43b22ee5a6ee2973e846fa2786a03f5d
//   printf '%s' '-O2 --target=trn1' | md5sum -> 7b408f46432f6d6d75566876e1d2a34b
//   printf '' | md5sum                       -> d41d8cd98f00b204e9800998ecf8427e
//   printf '%s' '--foo -O1' | md5sum         -> 17091caa16e10a2fec3d4f8dac2bc24d
//   printf '%s' '-O2' | md5sum               -> b5fb2f64a2668606ede8f74eb708e30b
//   printf '%s' 'a b' | md5sum               -> 0cc9cd4dd26c5137b675a0d819cb9ab0
//   printf '%s' 'ab' | md5sum                -> 187ef4436122d1cc2f40dc2b92f0eba0
// and, for the legacy flags part:
//   printf '3:-O2;13:--target=trn1;' | sha256sum
//     -> 335603f3a816222983af4eb4824bd15772cafd2df4ed08087faeb2c6f7681551
//   printf '' | sha256sum
//     -> e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
//   printf '3:a b;' | sha256sum    -> f5eed7a261b7760a3702070eeef13d5f6ed6e485da14f024168c44aa61b1517c
//   printf '1:a;1:b;' | sha256sum  -> d3bfd0a218bb20b3c8a571e4fff25d38b41887aa708d3f87c0fa2ae170bed6d9
//   printf '2:ab;' | sha256sum     -> 37c224db7de2de79b51fac09f637b48133749e43d8a865f6f6ddb3c694d976e4
//   printf '3:-O2;' | sha256sum    -> 69043d162c4f2fdd8a49f5a3423a4a55cfc17c49d2350d13e7ff2c40b6e4afbc

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/key.hpp>

#include "test_support.hpp"

namespace npc::cache {
namespace {

const std::string kGoldenGraph = "HloModule golden_test\n";
const std::string kGraphSha = "18bb2e5f8f5893902018d591a4c8f2fd43b22ee5a6ee2973e846fa2786a03f5d";
const std::vector<std::string> kGoldenFlags = {"-O2", "--target=trn1"};
const std::string kFlagsMd5 = "7b408f46432f6d6d75566876e1d2a34b";
const std::string kLegacyFlagsSha = "335603f3a816222983af4eb4824bd15772cafd2df4ed08087faeb2c6f7681551";
const std::string kGoldenVersion = "2.14.213.0+standin";

TEST(JoinedFlags, SingleSpacesAsTorchNeuronxJoinsThem) {
  EXPECT_EQ(joined_flags(kGoldenFlags), "-O2 --target=trn1");
  EXPECT_EQ(joined_flags({}), "");
  EXPECT_EQ(joined_flags({""}), "");
  EXPECT_EQ(joined_flags({"", ""}), " ");
  EXPECT_EQ(joined_flags({"a b"}), "a b");
  EXPECT_EQ(joined_flags({"a", "b"}), "a b");
}

TEST(FlagsHash, FirstEightOfMd5OfTheJoinedFlags) {
  EXPECT_EQ(flags_hash({}), "d41d8cd9");
  EXPECT_EQ(flags_hash({"--foo", "-O1"}), "17091caa");
  EXPECT_EQ(flags_hash(kGoldenFlags), "7b408f46");
  EXPECT_EQ(flags_hash({"-O2"}), "b5fb2f64");
}

TEST(LegacyFlagsHash, FirstEightOfSha256OfTheCanonicalEncoding) {
  EXPECT_EQ(legacy_flags_hash(kGoldenFlags), "335603f3");
  EXPECT_EQ(legacy_flags_hash({}), "e3b0c442");
  EXPECT_EQ(legacy_flags_hash({"-O2"}), "69043d16");
}

TEST(CanonicalFlags, LengthPrefixedEncoding) {
  EXPECT_EQ(canonical_flags(kGoldenFlags), "3:-O2;13:--target=trn1;");
  EXPECT_EQ(canonical_flags({}), "");
  EXPECT_EQ(canonical_flags({""}), "0:;");
  EXPECT_EQ(canonical_flags({"a b"}), "3:a b;");
  EXPECT_EQ(canonical_flags({"a", "b"}), "1:a;1:b;");
}

TEST(MakeKey, GoldenKeyForFixedInputs) {
  KeyInputs inputs;
  CacheKey key = make_key_for_graph(kGoldenGraph, kGoldenFlags, kGoldenVersion, &inputs);
  EXPECT_EQ(key.compiler_version, kGoldenVersion);
  EXPECT_EQ(key.graph_hash, "18bb2e5f8f5893902018");
  EXPECT_EQ(key.flags_hash, "7b408f46");
  EXPECT_EQ(key.version_dir(), "neuronxcc-2.14.213.0+standin");
  EXPECT_EQ(key.module_name(), "MODULE_18bb2e5f8f5893902018+7b408f46");
  EXPECT_EQ(key.str(), "neuronxcc-2.14.213.0+standin/MODULE_18bb2e5f8f5893902018+7b408f46");
  EXPECT_EQ(key.relative_path(),
            fs::path("neuronxcc-2.14.213.0+standin") / "MODULE_18bb2e5f8f5893902018+7b408f46");

  EXPECT_EQ(inputs.graph_sha256, kGraphSha);
  EXPECT_EQ(inputs.graph_bytes, 22U);
  EXPECT_EQ(inputs.flags, kGoldenFlags);
  EXPECT_EQ(inputs.flags_text, "-O2 --target=trn1");
  EXPECT_EQ(inputs.flags_md5, kFlagsMd5);
  EXPECT_EQ(inputs.legacy_flags_encoding, "3:-O2;13:--target=trn1;");
  EXPECT_EQ(inputs.legacy_flags_sha256, kLegacyFlagsSha);
  EXPECT_EQ(inputs.compiler_version, kGoldenVersion);
}

TEST(MakeKey, FromAGivenGraphDigest) {
  CacheKey key = make_key(kGraphSha, kGoldenFlags, "1.0");
  EXPECT_EQ(key, (CacheKey{"1.0", "18bb2e5f8f5893902018", "7b408f46"}));
}

TEST(MakeKey, EmptyFlagList) {
  KeyInputs inputs;
  CacheKey key = make_key_for_graph(kGoldenGraph, {}, kGoldenVersion, &inputs);
  EXPECT_EQ(key.flags_hash, "d41d8cd9");
  EXPECT_EQ(inputs.flags_text, "");
  EXPECT_EQ(inputs.flags_md5, "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(inputs.legacy_flags_encoding, "");
  EXPECT_EQ(inputs.legacy_flags_sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(MakeKey, FlagListsThatJoinAlikeShareTheFrameworksFlagsHash) {
  // Ambiguous, but what torch-neuronx computes: a key of our own would never
  // meet the framework's entries.
  EXPECT_EQ(make_key(kGraphSha, {"a b"}, "1").flags_hash, "0cc9cd4d");
  EXPECT_EQ(make_key(kGraphSha, {"a", "b"}, "1").flags_hash, "0cc9cd4d");
  EXPECT_EQ(make_key(kGraphSha, {"ab"}, "1").flags_hash, "187ef443");
  // Flag order matters.
  EXPECT_NE(make_key(kGraphSha, {"-O2", "--target=trn1"}, "1").flags_hash,
            make_key(kGraphSha, {"--target=trn1", "-O2"}, "1").flags_hash);
}

TEST(LegacyKey, TheEntryAnEarlierReleaseWrote) {
  EXPECT_EQ(legacy_key(kGraphSha, kGoldenFlags, "1.0"), (CacheKey{"1.0", "18bb2e5f8f5893902018", "335603f3"}));
  EXPECT_EQ(legacy_key(kGraphSha, {}, "1.0").flags_hash, "e3b0c442");
  // The legacy encoding told these apart.
  EXPECT_EQ(legacy_key(kGraphSha, {"a b"}, "1").flags_hash, "f5eed7a2");
  EXPECT_EQ(legacy_key(kGraphSha, {"a", "b"}, "1").flags_hash, "d3bfd0a2");
  EXPECT_EQ(legacy_key(kGraphSha, {"ab"}, "1").flags_hash, "37c224db");
}

TEST(MakeKey, CompilerVersionOnlyChangesTheVersionDirectory) {
  CacheKey a = make_key_for_graph(kGoldenGraph, kGoldenFlags, "1.0");
  CacheKey b = make_key_for_graph(kGoldenGraph, kGoldenFlags, "2.0");
  EXPECT_EQ(a.module_name(), b.module_name());
  EXPECT_NE(a.str(), b.str());
  EXPECT_NE(a, b);
}

TEST(ParseKey, RoundTripOfStr) {
  CacheKey key = make_key_for_graph(kGoldenGraph, kGoldenFlags, kGoldenVersion);
  auto parsed = parse_key(key.str());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, key);
}

TEST(ParseKey, RoundTripOfAFullEntryPath) {
  CacheKey key = make_key_for_graph(kGoldenGraph, kGoldenFlags, kGoldenVersion);
  fs::path entry = fs::path("/var/tmp/neuron-compile-cache") / key.relative_path();
  auto parsed = parse_key(entry.string());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, key);
  auto with_slash = parse_key(entry.string() + "/");
  ASSERT_TRUE(with_slash.has_value());
  EXPECT_EQ(*with_slash, key);
}

TEST(ParseKey, RejectsInvalidKeys) {
  for (const char* text : {
           "",
           "MODULE_ab+cd",                       // no version directory
           "2.14/MODULE_ab+cd",                  // no version prefix
           "/root/x/MODULE_ab+cd",               // no version prefix
           "neuronxcc-2.14/MODULE_xyz+12",       // non-hex graph hash
           "neuronxcc-2.14/MODULE_ab+1g",        // non-hex flags hash
           "neuronxcc-2.14/MODULE_AB+cd",        // upper-case hex is not ours
           "neuronxcc-2.14/MODULE_ab",           // no flags hash
           "neuronxcc-2.14/MODULE_+cd",          // empty graph hash
           "neuronxcc-2.14/MODULE_ab+",          // empty flags hash
           "neuronxcc-2.14/module_ab+cd",        // wrong prefix
           "neuronxcc-../MODULE_ab+cd",          // ".." as a version
           "neuronxcc-./MODULE_ab+cd",           // "." as a version
           "neuronxcc-/MODULE_ab+cd",            // empty version
           "neuronxcc-2 14/MODULE_ab+cd",        // a blank in the version
           "neuronxcc-2.14/x/MODULE_ab+cd",      // not directly in the version dir
       }) {
    EXPECT_EQ(parse_key(text), std::nullopt) << "[" << text << "]";
  }
}

TEST(ParseModuleName, SplitsTheHashes) {
  std::string g, f;
  ASSERT_TRUE(parse_module_name("MODULE_0123456789abcdef0123+89abcdef", g, f));
  EXPECT_EQ(g, "0123456789abcdef0123");
  EXPECT_EQ(f, "89abcdef");
  EXPECT_FALSE(parse_module_name("MODULE_ab-cd", g, f));
  EXPECT_FALSE(parse_module_name("ab+cd", g, f));
}

TEST(ParseModuleName, AcceptsTheFrameworksDecimalGraphHash) {
  std::string g, f;
  ASSERT_TRUE(parse_module_name("MODULE_9993940051196728623+3cc9a3cb", g, f));
  EXPECT_EQ(g, "9993940051196728623");
  EXPECT_EQ(f, "3cc9a3cb");
}

TEST(KeyFromModuleName, UsesTheCallersNameUnderOurCompilerVersion) {
  auto key = key_from_module_name("MODULE_56f0d314fda2b6e1e336+617f6939", "2.16.372.0+4a9b2326");
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->str(), "neuronxcc-2.16.372.0+4a9b2326/MODULE_56f0d314fda2b6e1e336+617f6939");
  auto decimal = key_from_module_name("MODULE_9993940051196728623+3cc9a3cb", "1.0");
  ASSERT_TRUE(decimal.has_value());
  EXPECT_EQ(*decimal, (CacheKey{"1.0", "9993940051196728623", "3cc9a3cb"}));
  for (const char* bad : {"", "MODULE_", "MODULE_ab", "MODULE_+cd", "MODULE_ab+", "ab+cd", "MODULE_AB+cd",
                          "MODULE_ab+cd/..", "MODULE_../x+cd", "neuronxcc-1/MODULE_ab+cd", "MODULE_ab+cd+ef"})
    EXPECT_EQ(key_from_module_name(bad, "1.0"), std::nullopt) << "[" << bad << "]";
}

TEST(ValidCompilerVersion, AcceptsDirectoryNameParts) {
  EXPECT_TRUE(valid_compiler_version("2.14.213.0+standin"));
  EXPECT_TRUE(valid_compiler_version("1.0-rc_1"));
  EXPECT_TRUE(valid_compiler_version("a"));
  EXPECT_TRUE(valid_compiler_version(std::string(128, '9')));
  EXPECT_TRUE(valid_compiler_version("..."));
}

TEST(ValidCompilerVersion, RejectsWhatCannotBeOneDirectoryName) {
  for (const char* text : {"", ".", "..", "a/b", "/", "a b", "a\tb", "a\nb", "1.0~x", "1:0", "$v"})
    EXPECT_FALSE(valid_compiler_version(text)) << "[" << text << "]";
  EXPECT_FALSE(valid_compiler_version(std::string(129, '9')));
}

TEST(ExplainKey, MentionsEveryInput) {
  KeyInputs inputs;
  const std::vector<std::string> flags = {"-O2", "--opt=a b"};
  CacheKey key = make_key_for_graph(kGoldenGraph, flags, kGoldenVersion, &inputs);
  std::string text = explain_key(inputs, key);
  for (const std::string& part :
       {key.str(), kGoldenVersion, std::string("22 bytes"), kGraphSha, key.graph_hash, std::string("-O2"),
        std::string("'--opt=a b'"), std::string("[-O2 --opt=a b]"), inputs.flags_md5, key.flags_hash,
        std::string("flags (2)"), std::string("3:-O2;9:--opt=a b;"), inputs.legacy_flags_sha256,
        legacy_key(kGraphSha, flags, kGoldenVersion).str()})
    EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' missing from:\n" << text;
}

TEST(ExplainKey, ExactText) {
  KeyInputs inputs;
  CacheKey key = make_key_for_graph(kGoldenGraph, kGoldenFlags, "1.0", &inputs);
  EXPECT_EQ(explain_key(inputs, key),
            "entry: neuronxcc-1.0/MODULE_18bb2e5f8f5893902018+7b408f46\n"
            "compiler version: 1.0  -> neuronxcc-1.0\n"
            "graph: 22 bytes, sha256 " + kGraphSha + "  -> graph hash 18bb2e5f8f5893902018 (first 20 digits)\n"
            "flags (2): -O2 --target=trn1\n"
            "flags text (joined by single spaces): [-O2 --target=trn1]\n"
            "flags md5: " + kFlagsMd5 + "  -> flags hash 7b408f46 (first 8 digits)\n"
            "legacy entry (read only): neuronxcc-1.0/MODULE_18bb2e5f8f5893902018+335603f3\n"
            "legacy flags encoding: 3:-O2;13:--target=trn1;\n"
            "legacy flags sha256: " + kLegacyFlagsSha + "  -> legacy flags hash 335603f3 (first 8 digits)\n");
}

// The key of the same graph bytes and flags is the same whatever the cache
// root, the working directory or where the graph file is: checked through the
// real program.
class KeyProgramTest : public test::TempDirTest {};

TEST_F(KeyProgramTest, KeyDoesNotDependOnCacheRootOrWorkingDirectory) {
  fs::path work1 = dir() / "work1", work2 = dir() / "elsewhere" / "work2";
  fs::create_directories(work1);
  fs::create_directories(work2);
  test::write_text(work1 / "g.pb", kGoldenGraph);
  test::write_text(dir() / "copies" / "deeper" / "graph copy.pb", kGoldenGraph);

  auto run_key = [&](const fs::path& cwd, const std::string& graph_arg, const std::string& cc_flags) {
    test::RunOptions options;
    options.cwd = cwd;
    options.set_env = {{"NEURON_CC_FLAGS", cc_flags}, {"TMPDIR", dir().string()}};
    options.unset_env = {"NEURON_COMPILE_CACHE_URL", "NEURON_CC"};
    return test::run({test::program("neuron_cc_wrapper").string(), "key", "--graph", graph_arg,
                      "--compiler", test::standin_compiler().string()},
                     options);
  };
  auto first = run_key(work1, "g.pb", "--cache_dir=" + (dir() / "c1").string() + " -O2");
  auto second = run_key(work2, (dir() / "copies" / "deeper" / "graph copy.pb").string(),
                        "-O2 --cache_dir " + (dir() / "c2").string());
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  ASSERT_EQ(second.exit_code, 0) << second.describe();

  auto first_line = [](const std::string& out) { return out.substr(0, out.find('\n')); };
  fs::path entry1 = first_line(first.out), entry2 = first_line(second.out);
  // graph hash: first 20 hex of sha256 of the graph; flags hash: first 8 hex
  // of md5("-O2") (see the top of this file).
  const std::string module = "MODULE_18bb2e5f8f5893902018+b5fb2f64";
  const std::string version_dir = std::string("neuronxcc-") + test::kStandinVersion;
  EXPECT_EQ(entry1, dir() / "c1" / version_dir / module);
  EXPECT_EQ(entry2, dir() / "c2" / version_dir / module);
  EXPECT_EQ(entry1.filename(), entry2.filename());
  EXPECT_EQ(entry1.parent_path().filename(), entry2.parent_path().filename());
  // The last line is the legacy entry's path, in each cache.
  const std::string legacy_module = "MODULE_18bb2e5f8f5893902018+69043d16";
  auto last_line = [](const std::string& out) {
    auto end = out.rfind('\n');
    return out.substr(out.rfind('\n', end - 1) + 1, end - out.rfind('\n', end - 1) - 1);
  };
  EXPECT_EQ(last_line(first.out),
            "legacy entry path: " + (dir() / "c1" / version_dir / legacy_module).string());
  EXPECT_EQ(last_line(second.out),
            "legacy entry path: " + (dir() / "c2" / version_dir / legacy_module).string());
  // Everything between (the explanation) is identical.
  auto middle = [](const std::string& out) {
    auto begin = out.find('\n') + 1;
    return out.substr(begin, out.rfind('\n', out.size() - 2) + 1 - begin);
  };
  EXPECT_EQ(middle(first.out), middle(second.out));
  EXPECT_NE(middle(first.out).find("flags md5: b5fb2f64a2668606ede8f74eb708e30b"), std::string::npos) << first.out;
}

} // namespace
} // namespace npc::cache
