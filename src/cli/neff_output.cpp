#include <npc/cli/neff_output.hpp>

#include <string>

#include <npc/cache/layout.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/output_file.hpp>

namespace npc::cli {

namespace {

// What to do about any output the check refuses.
constexpr const char* kOutputHint = " (name a file in a writable directory)";

} // namespace

void check_neff_output(const fs::path& output) {
  if (auto s = util::check_output_writable(output); !s) throw OutputFault("--output: " + s.error() + kOutputHint);
}

// copy_neff publishes by rename, right for a regular file (at a symlink's
// target), wrong for a device or FIFO, which would be replaced: there the
// NEFF is verified into a staging file first, then written through.
Result<cache::Integrity> deliver_neff(const cache::Entry& entry, const fs::path& output) {
  auto target = util::resolve_output(output);
  if (!target) throw OutputFault("--output: " + target.error() + kOutputHint);
  if (target->kind == util::OutputKind::replace) {
    auto integrity = entry.copy_neff(target->path);
    // Whose fault: the output's when it cannot take a file now (it went,
    // or became read-only, since it was checked), else the entry's.
    if (!integrity) check_neff_output(output);
    return integrity;
  }
  util::TempDir staging(util::staging_dir_for_output(output), std::string(util::kTempPrefix) + "neff-");
  fs::path staged = staging.path() / cache::kNeffFile;
  auto integrity = entry.copy_neff(staged);
  if (!integrity || *integrity == cache::Integrity::mismatch) return integrity;
  if (auto s = util::publish_output_from(staged, output); !s) throw OutputFault("--output: " + s.error());
  return integrity;
}

void DeliveryUnderLock::operator()(const cache::Entry& done) {
  try {
    deliver_(done);
    delivered_ = true;
  } catch (const OutputFault& fault) {
    fault_ = fault;
  }
}

cache::UsageCounts DeliveryUnderLock::usage_of(const compile::EntryCompileResult& result,
                                               const fs::path& entry_dir) const {
  if (fault_ && result.outcome == compile::EntryOutcome::already_done) return {};
  return compile::usage_of(result, entry_dir);
}

void DeliveryUnderLock::rethrow_fault() const {
  if (fault_) throw *fault_;
}

} // namespace npc::cli
