// config/neuron_cc_flags: the cache options inside NEURON_CC_FLAGS, and where
// the cache is.

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/config/neuron_cc_flags.hpp>
#include <npc/util/error.hpp>

namespace npc::config {
namespace {

using Words = std::vector<std::string>;
using std::chrono::seconds;

// The message of the UsageError that parsing `text` throws.
std::string usage_error(const std::string& text) {
  try {
    auto flags = parse_neuron_cc_flags(text);
    ADD_FAILURE() << "no UsageError for NEURON_CC_FLAGS=[" << text << "]";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type for [" << text << "]: " << e.what();
  }
  return "";
}

void expect_mentions(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' missing from: " << message;
}

TEST(ParseNeuronCcFlags, EmptyTextHasDefaultsAndNoFlags) {
  auto flags = parse_neuron_cc_flags("");
  EXPECT_EQ(flags.compiler_flags, Words{});
  EXPECT_FALSE(flags.cache.cache_dir.has_value());
  EXPECT_FALSE(flags.cache.no_cache);
  EXPECT_FALSE(flags.cache.cache_size.has_value());
  EXPECT_FALSE(flags.cache.cache_ttl_days.has_value());
  EXPECT_FALSE(flags.cache.retry_failed_compilation);
  EXPECT_FALSE(flags.cache.log_level.has_value());
}

TEST(ParseNeuronCcFlags, CacheDirInBothForms) {
  for (const char* text : {"--cache_dir=/data/cc", "--cache_dir /data/cc"}) {
    auto flags = parse_neuron_cc_flags(text);
    ASSERT_TRUE(flags.cache.cache_dir.has_value()) << text;
    EXPECT_EQ(*flags.cache.cache_dir, fs::path("/data/cc")) << text;
    EXPECT_EQ(flags.compiler_flags, Words{}) << text;
  }
  // A quoted directory with a space in it.
  auto quoted = parse_neuron_cc_flags("'--cache_dir=/my cache' --cache_dir \"/other dir\"");
  EXPECT_EQ(*quoted.cache.cache_dir, fs::path("/other dir"));
}

TEST(ParseNeuronCcFlags, NoCache) {
  auto flags = parse_neuron_cc_flags("--no_cache");
  EXPECT_TRUE(flags.cache.no_cache);
  EXPECT_EQ(flags.compiler_flags, Words{});
}

TEST(ParseNeuronCcFlags, CacheSizeInBothForms) {
  EXPECT_EQ(parse_neuron_cc_flags("--cache_size=100GB").cache.cache_size, 100'000'000'000ULL);
  EXPECT_EQ(parse_neuron_cc_flags("--cache_size 512MiB").cache.cache_size, 536'870'912ULL);
  EXPECT_EQ(parse_neuron_cc_flags("--cache_size=12345").cache.cache_size, 12345ULL);
  EXPECT_EQ(parse_neuron_cc_flags("--cache_size 0").cache.cache_size, 0ULL);
}

TEST(ParseNeuronCcFlags, CacheTtlInBothForms) {
  auto a = parse_neuron_cc_flags("--cache_ttl=7");
  EXPECT_EQ(a.cache.cache_ttl_days, 7.0);
  EXPECT_EQ(a.cache.ttl(), seconds(7 * 86400));
  auto b = parse_neuron_cc_flags("--cache_ttl 0.5");
  EXPECT_EQ(b.cache.cache_ttl_days, 0.5);
  EXPECT_EQ(b.cache.ttl(), seconds(43200));
  EXPECT_EQ(parse_neuron_cc_flags("--cache_ttl=0").cache.ttl(), seconds(0));
}

TEST(ParseNeuronCcFlags, RetryFailedCompilation) {
  auto flags = parse_neuron_cc_flags("--retry_failed_compilation");
  EXPECT_TRUE(flags.cache.retry_failed_compilation);
  EXPECT_EQ(flags.compiler_flags, Words{});
}

TEST(ParseNeuronCcFlags, LogLevelAnyCaseInBothForms) {
  struct Case {
    const char* text;
    util::LogLevel level;
  };
  const Case cases[] = {
      {"--log_level=WARNING", util::LogLevel::warning}, {"--log_level warning", util::LogLevel::warning},
      {"--log_level=INFO", util::LogLevel::info},       {"--log_level Info", util::LogLevel::info},
      {"--log_level=ERROR", util::LogLevel::error},     {"--log_level error", util::LogLevel::error},
      {"--log_level=DEBUG", util::LogLevel::debug},     {"--log_level dEbUg", util::LogLevel::debug},
      {"--log_level=WARN", util::LogLevel::warning},
  };
  for (const auto& c : cases) {
    auto flags = parse_neuron_cc_flags(c.text);
    ASSERT_TRUE(flags.cache.log_level.has_value()) << c.text;
    EXPECT_EQ(*flags.cache.log_level, c.level) << c.text;
    EXPECT_EQ(flags.compiler_flags, Words{}) << c.text;
  }
}

TEST(ParseNeuronCcFlags, OtherWordsPassThroughInOrder) {
  auto flags = parse_neuron_cc_flags(
      "-O2 --cache_dir=/c --model-type=transformer '--extra=a b' --cache_size 1G "
      "--cache_dir_extra=1 --log_level_x --enable-fast-loading-neuron-binaries "
      "--no_cache --retry_failed_compilation \"--msg=say \\\"hi\\\"\" --cache_ttl 3 --target=trn1");
  EXPECT_EQ(flags.compiler_flags,
            (Words{"-O2", "--model-type=transformer", "--extra=a b", "--cache_dir_extra=1",
                   "--log_level_x", "--enable-fast-loading-neuron-binaries", "--msg=say \"hi\"",
                   "--target=trn1"}));
  EXPECT_EQ(*flags.cache.cache_dir, fs::path("/c"));
  EXPECT_EQ(flags.cache.cache_size, 1'000'000'000ULL);
  EXPECT_EQ(flags.cache.cache_ttl_days, 3.0);
  EXPECT_TRUE(flags.cache.no_cache);
  EXPECT_TRUE(flags.cache.retry_failed_compilation);
}

TEST(ParseNeuronCcFlags, BadCacheSizeIsAUsageError) {
  expect_mentions(usage_error("--cache_size=12x"), {"NEURON_CC_FLAGS", "--cache_size", "12x"});
  expect_mentions(usage_error("--cache_size=-5"), {"NEURON_CC_FLAGS", "--cache_size", "-5"});
  expect_mentions(usage_error("--cache_size -5"), {"NEURON_CC_FLAGS", "--cache_size", "-5"});
  expect_mentions(usage_error("--cache_size=1.5"), {"NEURON_CC_FLAGS", "--cache_size", "1.5"});
  expect_mentions(usage_error("--cache_size="), {"NEURON_CC_FLAGS", "--cache_size", "''"});
}

TEST(ParseNeuronCcFlags, BadCacheTtlIsAUsageError) {
  expect_mentions(usage_error("--cache_ttl=-1"), {"NEURON_CC_FLAGS", "--cache_ttl", "-1"});
  expect_mentions(usage_error("--cache_ttl abc"), {"NEURON_CC_FLAGS", "--cache_ttl", "abc"});
  expect_mentions(usage_error("--cache_ttl=abc"), {"NEURON_CC_FLAGS", "--cache_ttl", "abc"});
}

TEST(ParseNeuronCcFlags, BadLogLevelIsAUsageError) {
  expect_mentions(usage_error("--log_level=LOUD"), {"NEURON_CC_FLAGS", "--log_level", "LOUD"});
  expect_mentions(usage_error("--log_level 3"), {"NEURON_CC_FLAGS", "--log_level", "'3'"});
}

TEST(ParseNeuronCcFlags, EmptyCacheDirIsAUsageError) {
  expect_mentions(usage_error("--cache_dir="), {"NEURON_CC_FLAGS", "--cache_dir", "''"});
}

TEST(ParseNeuronCcFlags, MissingValueIsAUsageError) {
  expect_mentions(usage_error("-O2 --cache_dir"), {"NEURON_CC_FLAGS", "--cache_dir", "missing"});
  expect_mentions(usage_error("--cache_size"), {"NEURON_CC_FLAGS", "--cache_size", "missing"});
  expect_mentions(usage_error("--log_level"), {"NEURON_CC_FLAGS", "--log_level", "missing"});
  // The next option is not taken as the value.
  expect_mentions(usage_error("--cache_dir --no_cache"), {"NEURON_CC_FLAGS", "--cache_dir", "missing"});
}

TEST(ParseNeuronCcFlags, ValueGivenToValuelessOptionIsAUsageError) {
  expect_mentions(usage_error("--no_cache=1"), {"NEURON_CC_FLAGS", "--no_cache", "'1'"});
  expect_mentions(usage_error("--retry_failed_compilation=yes"),
                  {"NEURON_CC_FLAGS", "--retry_failed_compilation", "'yes'"});
}

TEST(ParseNeuronCcFlags, UnbalancedQuoteIsAUsageError) {
  EXPECT_EQ(usage_error("-O2 '--x"), "NEURON_CC_FLAGS: unbalanced single quote at position 5");
  EXPECT_EQ(usage_error("\"-O2"), "NEURON_CC_FLAGS: unbalanced double quote at position 1");
}

TEST(SplitCacheOptions, OutputIsRefusedInBothForms) {
  EXPECT_EQ(usage_error("-O2 --output=/tmp/x.neff"),
            "NEURON_CC_FLAGS: --output is chosen for each compile by this tool; remove '--output=/tmp/x.neff' "
            "from the compiler flags");
  EXPECT_EQ(usage_error("--output /tmp/x.neff"),
            "NEURON_CC_FLAGS: --output is chosen for each compile by this tool; remove '--output' from the "
            "compiler flags");
  // Only the exact option: a flag that merely starts alike passes through.
  EXPECT_EQ(parse_neuron_cc_flags("--output-format=json").compiler_flags, (Words{"--output-format=json"}));
}

TEST(SplitCacheOptions, NamesTheSourceInErrors) {
  EXPECT_EQ(split_cache_options({"--a", "b c", "--cache_size", "2k"}, "x").compiler_flags,
            (Words{"--a", "b c"}));
  try {
    auto flags = split_cache_options({"--cache_size=huge"}, "command line");
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    expect_mentions(e.what(), {"command line", "--cache_size", "huge"});
  }
}

TEST(CacheSettings, Defaults) {
  CacheSettings settings;
  EXPECT_EQ(settings.size_limit(), 100'000'000'000ULL);
  EXPECT_EQ(kDefaultCacheSizeBytes, 100'000'000'000ULL);
  EXPECT_EQ(settings.ttl(), seconds(30 * 86400));
}

TEST(CacheSettings, ExplicitValuesOverrideDefaults) {
  CacheSettings settings;
  settings.cache_size = 42;
  settings.cache_ttl_days = 1.5;
  EXPECT_EQ(settings.size_limit(), 42ULL);
  EXPECT_EQ(settings.ttl(), seconds(129600));
}

// Regression (fixed): CacheSettings::ttl() converts days to seconds with std::llround, which
// overflows for a huge --cache_ttl ("never evict", e.g. 1e15 days) and gives
// LLONG_MIN on x86-64: a negative TTL, so no entry is protected at all.
TEST(CacheSettings, HugeTtlStaysPositive) {
  auto flags = parse_neuron_cc_flags("--cache_ttl=1000000000000000");
  EXPECT_GT(flags.cache.ttl().count(), 0);
  EXPECT_GE(flags.cache.ttl(), seconds(100LL * 365 * 86400));
}

TEST(CacheSettings, MergeLetsLaterSettingsWin) {
  CacheSettings earlier;
  earlier.cache_dir = fs::path("/a");
  earlier.cache_size = 1;
  earlier.retry_failed_compilation = true;
  earlier.log_level = util::LogLevel::debug;
  CacheSettings later;
  later.cache_dir = fs::path("/b");
  later.cache_ttl_days = 2;
  later.no_cache = true;
  earlier.merge(later);
  EXPECT_EQ(*earlier.cache_dir, fs::path("/b"));
  EXPECT_EQ(earlier.cache_size, 1ULL);            // kept: later did not set it
  EXPECT_EQ(earlier.cache_ttl_days, 2.0);         // taken from later
  EXPECT_TRUE(earlier.no_cache);                  // switched on by later
  EXPECT_TRUE(earlier.retry_failed_compilation);  // not switched off by later
  EXPECT_EQ(earlier.log_level, util::LogLevel::debug);

  CacheSettings again;
  again.log_level = util::LogLevel::error;
  again.cache_size = 7;
  earlier.merge(again);
  EXPECT_EQ(earlier.log_level, util::LogLevel::error);
  EXPECT_EQ(earlier.cache_size, 7ULL);
  EXPECT_EQ(*earlier.cache_dir, fs::path("/b"));
  EXPECT_TRUE(earlier.no_cache);
}

fs::path resolve_cache_root(const CacheSettings& settings, const std::optional<std::string>& url) {
  auto location = resolve_cache_location(settings, url, "/mirror");
  EXPECT_FALSE(location.remote) << *location.remote;
  return location.root;
}

TEST(ResolveCacheRoot, CacheDirIsTheRootAsInCurrentReleases) {
  CacheSettings settings;
  settings.cache_dir = fs::path("/data/d");
  EXPECT_EQ(resolve_cache_root(settings, std::nullopt), fs::path("/data/d"));
  // --cache_dir wins over NEURON_COMPILE_CACHE_URL.
  EXPECT_EQ(resolve_cache_root(settings, std::string("/elsewhere")), fs::path("/data/d"));
}

TEST(ResolveCacheRoot, CacheDirOfTheOldLayoutKeepsWorking) {
  auto base = fs::temp_directory_path() / ("npc-root-" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base / "neuron-compile-cache" / "neuronxcc-1.0");
  CacheSettings settings;
  settings.cache_dir = base;
  // Only the old layout there: it is used.
  EXPECT_EQ(resolve_cache_root(settings, std::nullopt), base / "neuron-compile-cache");
  // Both: DIR itself, as current releases read it.
  fs::create_directories(base / "neuronxcc-2.0");
  EXPECT_EQ(resolve_cache_root(settings, std::nullopt), base);
  fs::remove_all(base);
}

TEST(ResolveCacheRoot, AnS3CacheIsUsedThroughItsMirror) {
  CacheSettings settings;
  settings.cache_dir = fs::path("s3://bucket/prefix/");
  auto location = resolve_cache_location(settings, std::nullopt, "/mirror");
  EXPECT_EQ(location.remote, "s3://bucket/prefix");
  EXPECT_EQ(location.root, fs::path("/mirror/s3/bucket/prefix"));
  location = resolve_cache_location({}, std::string("S3://b"), "/m");
  EXPECT_EQ(location.remote, "s3://b");
  EXPECT_EQ(location.root, fs::path("/m/s3/b"));
  // --cache_dir wins over the URL.
  settings.cache_dir = fs::path("/local");
  location = resolve_cache_location(settings, std::string("s3://b"), "/m");
  EXPECT_FALSE(location.remote);
  EXPECT_EQ(location.root, fs::path("/local"));
}

TEST(ResolveCacheRoot, AnS3UrlWithoutBucketOrWithEmptyPartsIsAUsageError) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"s3://", "NEURON_COMPILE_CACHE_URL: 's3://' names no bucket (write s3://bucket or s3://bucket/prefix)"},
      {"s3:///p", "NEURON_COMPILE_CACHE_URL: 's3:///p' names no bucket (write s3://bucket or s3://bucket/prefix)"},
      {"s3://b//p", "NEURON_COMPILE_CACHE_URL: 's3://b//p' has an empty, '.' or '..' part in its prefix "
                    "(write s3://bucket/prefix)"},
      {"s3://b/../p", "NEURON_COMPILE_CACHE_URL: 's3://b/../p' has an empty, '.' or '..' part in its prefix "
                      "(write s3://bucket/prefix)"},
  };
  for (const auto& [url, message] : cases) {
    try {
      auto location = resolve_cache_location({}, url, "/m");
      ADD_FAILURE() << url << " gave " << location.root;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
}

TEST(ResolveCacheRoot, CacheUrlPlainPathIsTheRoot) {
  EXPECT_EQ(resolve_cache_root({}, std::string("/mnt/shared/cache")), fs::path("/mnt/shared/cache"));
}

TEST(ResolveCacheRoot, FileUrlIsPercentDecodedAndMayNameLocalhost) {
  EXPECT_EQ(resolve_cache_root({}, std::string("file:///my%20cache/a%25b")), fs::path("/my cache/a%b"));
  EXPECT_EQ(resolve_cache_root({}, std::string("file://localhost/x")), fs::path("/x"));
  EXPECT_EQ(resolve_cache_root({}, std::string("file:///caf%C3%A9")), fs::path("/caf\xC3\xA9"));
  for (const char* bad : {"file:///a%2", "file:///a%zz", "file:///a%00b"}) {
    try {
      auto root = resolve_cache_root({}, std::string(bad));
      ADD_FAILURE() << bad << " gave " << root;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("is not a percent escape of a byte"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(ResolveCacheRoot, CacheUrlFileUrlIsTheRoot) {
  EXPECT_EQ(resolve_cache_root({}, std::string("file:///x")), fs::path("/x"));
  EXPECT_EQ(resolve_cache_root({}, std::string("FILE:///x/y")), fs::path("/x/y"));
}

TEST(ResolveCacheRoot, AnotherRemoteSchemeIsAUsageError) {
  for (const char* url : {"gs://bucket", "http://host/prefix", "HTTPS://Host"}) {
    try {
      auto root = resolve_cache_root({}, std::string(url));
      ADD_FAILURE() << "no UsageError for " << url << " (got " << root << ")";
    } catch (const UsageError& e) {
      expect_mentions(e.what(), {"NEURON_COMPILE_CACHE_URL", url, "or s3://bucket/prefix"});
    }
  }
  EXPECT_THROW(auto r = resolve_cache_root({}, std::string("file://relative/path")), UsageError);
}

TEST(ResolveCacheRoot, DefaultRoot) {
  EXPECT_EQ(resolve_cache_root({}, std::nullopt), fs::path("/var/tmp/neuron-compile-cache"));
  EXPECT_EQ(resolve_cache_root({}, std::string("")), fs::path("/var/tmp/neuron-compile-cache"));
}

} // namespace
} // namespace npc::config
