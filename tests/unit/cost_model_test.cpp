// launcher/cost_model: predictions from the entry's own history, from compiles
// of similar size, and from nothing.

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/layout.hpp>
#include <npc/launcher/cost_model.hpp>

#include "test_support.hpp"

namespace npc::launcher {
namespace {

constexpr std::uint64_t kGB = 1'000'000'000ULL;

cache::AttemptRecord record(const std::string& outcome, double seconds, std::uint64_t peak) {
  cache::AttemptRecord r;
  r.outcome = outcome;
  r.wall_seconds = seconds;
  r.peak_rss_bytes = peak;
  return r;
}

class CostModelTest : public test::TempDirTest {
protected:
  fs::path write_meta(const std::string& module, std::uint64_t graph_bytes,
                      std::vector<cache::AttemptRecord> attempts) {
    fs::path d = dir() / "neuronxcc-1.0" / module;
    fs::create_directories(d);
    cache::EntryMeta meta;
    meta.graph_bytes = graph_bytes;
    meta.attempts = std::move(attempts);
    for (std::size_t i = 0; i < meta.attempts.size(); ++i) meta.attempts[i].attempt = static_cast<int>(i + 1);
    auto written = cache::write_entry_meta(d, meta);
    EXPECT_TRUE(written.ok()) << (written.ok() ? "" : written.error());
    return d;
  }
};

TEST_F(CostModelTest, OwnLastSuccessComesFirst) {
  fs::path entry = write_meta("MODULE_aa+00", 1000,
                              {record("success", 10, 1 * kGB), record("failed", 5, 9 * kGB),
                               record("success", 42, 3 * kGB), record("timeout", 99, 8 * kGB)});
  // Samples that would predict something else entirely.
  CostModel model({{1000, 1000, 100 * kGB}});
  Prediction p = model.predict(entry, 1000);
  EXPECT_DOUBLE_EQ(p.seconds, 42);
  EXPECT_EQ(p.peak_bytes, 3 * kGB);
  EXPECT_TRUE(p.from_history);
}

TEST(CostModel, SimilarSizeSamplesGiveTheMedianRate) {
  // Rates (seconds per byte): 0.01, 0.03, 0.02 for sizes within 2x of 1000;
  // the 100000-byte sample is not similar and is left out.
  CostModel model({{1000, 10, 1'000'000},
                   {1500, 45, 3'000'000},
                   {2000, 40, 1'000'000},
                   {100000, 100000, 1'000'000'000}});
  EXPECT_EQ(model.samples(), 4U);
  Prediction p = model.predict_from_size(1000);
  EXPECT_DOUBLE_EQ(p.seconds, 20);            // median rate 0.02 x 1000 bytes
  EXPECT_EQ(p.peak_bytes, 2'000'000U);        // largest peak per byte: 3e6 / 1500 = 2000
  EXPECT_TRUE(p.from_history);
}

TEST(CostModel, EvenNumberOfSimilarSamplesTakesTheUpperMedian) {
  CostModel model({{1000, 10, 0}, {1000, 20, 0}, {1000, 30, 0}, {1000, 40, 0}});
  EXPECT_DOUBLE_EQ(model.predict_from_size(1000).seconds, 30);
}

TEST(CostModel, NoSimilarSizeUsesEverySample) {
  CostModel model({{100000, 100, 50'000'000}, {200000, 600, 100'000'000}});
  // Rates 0.001 and 0.003: the median of two is the upper one.
  Prediction p = model.predict_from_size(1000);
  EXPECT_DOUBLE_EQ(p.seconds, 3);
  EXPECT_EQ(p.peak_bytes, 500'000U); // 500 bytes of peak per graph byte
  EXPECT_TRUE(p.from_history);
}

TEST(CostModel, FallbackWithoutSamples) {
  CostModel model;
  EXPECT_EQ(model.samples(), 0U);
  Prediction p = model.predict_from_size(5'000'000);
  EXPECT_DOUBLE_EQ(p.seconds, 5'000'000 / kFallbackBytesPerSecond);
  EXPECT_DOUBLE_EQ(p.seconds, 5);
  EXPECT_EQ(p.peak_bytes, 0U);
  EXPECT_FALSE(p.from_history);
  // Bigger graphs are predicted to take longer.
  EXPECT_GT(model.predict_from_size(2000).seconds, model.predict_from_size(1000).seconds);
}

TEST_F(CostModelTest, EntryWithoutRecordUsesItsSize) {
  fs::path entry = dir() / "neuronxcc-1.0" / "MODULE_bb+00";
  fs::create_directories(entry);
  CostModel model({{1000, 10, 1'000'000}});
  Prediction p = model.predict(entry, 1000);
  EXPECT_DOUBLE_EQ(p.seconds, 10);
  EXPECT_EQ(p.peak_bytes, 1'000'000U);
}

TEST_F(CostModelTest, FailedAttemptsRaiseThePeak) {
  fs::path entry = write_meta("MODULE_cc+00", 1000,
                              {record("failed", 3, 5 * kGB), record("timeout", 3, 2 * kGB)});
  CostModel empty;
  Prediction p = empty.predict(entry, 2'000'000);
  EXPECT_DOUBLE_EQ(p.seconds, 2);  // from the size alone
  EXPECT_EQ(p.peak_bytes, 5 * kGB); // the most it reached before failing
  EXPECT_FALSE(p.from_history);
}

TEST_F(CostModelTest, FromVersionDirReadsSuccessfulAttempts) {
  write_meta("MODULE_aa+00", 1000, {record("success", 10, 1'000'000)});
  write_meta("MODULE_bb+00", 2000, {record("failed", 1, 1), record("success", 40, 8'000'000)});
  write_meta("MODULE_cc+00", 1500, {record("failed", 99, 99)});          // no success: no sample
  write_meta("MODULE_dd+00", 0, {record("success", 7, 7)});              // no graph size: no sample
  write_meta("not-a-module", 1000, {record("success", 1000, 1)});        // not an entry
  fs::create_directories(dir() / "neuronxcc-1.0" / "MODULE_ee+00");      // no record at all
  fs::create_directories(dir() / "neuronxcc-1.0" / "MODULE_ff+00");
  test::write_text(dir() / "neuronxcc-1.0" / "MODULE_ff+00" / cache::kMetaFile, "{corrupt"); // skipped

  CostModel model = CostModel::from_version_dir(dir() / "neuronxcc-1.0");
  EXPECT_EQ(model.samples(), 2U);
  // Rates 0.01 (1000 bytes, 10 s) and 0.02 (2000 bytes, 40 s); peaks per byte 1000 and 4000.
  Prediction p = model.predict_from_size(1500);
  EXPECT_DOUBLE_EQ(p.seconds, 0.02 * 1500);
  EXPECT_EQ(p.peak_bytes, 6'000'000U);
  EXPECT_TRUE(p.from_history);
}

TEST_F(CostModelTest, FromMissingVersionDirIsEmpty) {
  CostModel model = CostModel::from_version_dir(dir() / "neuronxcc-9.9");
  EXPECT_EQ(model.samples(), 0U);
  EXPECT_FALSE(model.predict_from_size(10).from_history);
}

TEST(SizeFit, RecoversTheLineOfExactSamples) {
  // 30 ms per compile plus 5 µs per byte.
  auto fit = fit_sizes({{200'000, 1.03, 0}, {160'000, 0.83, 0}, {16'400, 0.112, 0}});
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->fixed_seconds, 0.03, 1e-9);
  EXPECT_NEAR(fit->seconds_per_byte, 5e-6, 1e-15);
  EXPECT_NEAR(fit->at(100'000), 0.53, 1e-9);
  EXPECT_NEAR(fit->relative_error, 0, 1e-9);
  EXPECT_EQ(fit->samples, 3U);
}

TEST(SizeFit, TellsHowWellTheLineExplainsTheSamples) {
  // 1 s and 3 s at 1000 bytes, 2 s at 2000: the least-squares line is flat,
  // so the median rate through zero (1e-3 s per byte) is used.
  auto flat = fit_sizes({{1000, 1.0, 0}, {1000, 3.0, 0}, {2000, 2.0, 0}});
  ASSERT_TRUE(flat.has_value());
  EXPECT_EQ(flat->fixed_seconds, 0);
  EXPECT_DOUBLE_EQ(flat->seconds_per_byte, 1e-3);
  // Off by 0, -2/3 and 0 of what was measured.
  EXPECT_NEAR(flat->relative_error, std::sqrt((4.0 / 9.0) / 3.0), 1e-12);
}

TEST(SizeFit, NeedsTwoDifferentSizes) {
  EXPECT_FALSE(fit_sizes({}).has_value());
  EXPECT_FALSE(fit_sizes({{1000, 1.0, 0}}).has_value());
  EXPECT_FALSE(fit_sizes({{1000, 1.0, 0}, {1000, 2.0, 0}}).has_value());
}

TEST(SizeFit, AFallingOrNegativeLineBecomesTheMedianRateThroughZero) {
  // Bigger took less: no slope to trust. Rates 1e-3, 2.5e-4, 1e-4 s/byte.
  auto falling = fit_sizes({{1000, 1.0, 0}, {2000, 0.5, 0}, {4000, 0.4, 0}});
  ASSERT_TRUE(falling.has_value());
  EXPECT_EQ(falling->fixed_seconds, 0);
  EXPECT_DOUBLE_EQ(falling->seconds_per_byte, 2.5e-4);
  // Steeper than proportional: the line would cross zero above 0 bytes.
  auto negative = fit_sizes({{1000, 0.1, 0}, {2000, 1.1, 0}});
  ASSERT_TRUE(negative.has_value());
  EXPECT_EQ(negative->fixed_seconds, 0);
  EXPECT_DOUBLE_EQ(negative->seconds_per_byte, 5.5e-4); // the upper median of 1e-4 and 5.5e-4
}

} // namespace
} // namespace npc::launcher
