#include <npc/compile/target.hpp>

#include <algorithm>
#include <fcntl.h>
#include <mutex>

#include <spdlog/spdlog.h>

#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/strings.hpp>

namespace npc::compile {

namespace {

// A DMI product name is one short line; anything longer is not one.
constexpr std::uint64_t kMaxProductNameBytes = 256;

std::string known_targets_text() {
  std::string text;
  for (auto target : kKnownTargets) {
    if (!text.empty()) text += ", ";
    text += target;
  }
  return text;
}

// The variable's value as the target, or a UsageError: a typo here would
// otherwise surface hours later as a NEFF the chip refuses.
std::string validated_override(const std::string& value) {
  if (std::find(kKnownTargets.begin(), kKnownTargets.end(), value) == kKnownTargets.end())
    throw UsageError(std::string(kTargetOverrideVariable) + " has the bad value '" + value +
                     "': expected one of " + known_targets_text() + " (or unset it)");
  return value;
}

Target decide(const std::optional<std::string>& override_value, const std::optional<std::string>& machine) {
  if (override_value && !override_value->empty())
    return {validated_override(*override_value), TargetSource::override_variable};
  if (machine) return {*machine, TargetSource::machine};
  return {std::string(kFallbackTarget), TargetSource::fallback};
}

} // namespace

bool flags_name_target(const std::vector<std::string>& flags) {
  return std::any_of(flags.begin(), flags.end(),
                     [](const std::string& f) { return f == "--target" || f.starts_with("--target="); });
}

std::optional<std::string> target_from_product_name(std::string_view product_name) {
  std::string name = util::to_lower(util::trim(product_name));
  auto dot = name.find('.');
  if (dot == std::string::npos || dot + 1 == name.size()) return std::nullopt; // "<family>.<size>"
  std::string_view family = std::string_view(name).substr(0, dot);
  // trn1n is a trn1 with more network; trn2u the UltraServer form of trn2.
  if (family == "trn1" || family == "trn1n") return "trn1";
  if (family == "trn2" || family == "trn2u") return "trn2";
  if (family == "inf2") return "inf2";
  return std::nullopt;
}

std::optional<std::string> detect_target(const fs::path& dmi_product_name) {
  util::UniqueFd fd(::open(dmi_product_name.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  auto text = util::read_fd(fd.get(), kMaxProductNameBytes);
  if (!text) return std::nullopt;
  return target_from_product_name(*text);
}

Target choose_target(const std::optional<std::string>& override_value, const fs::path& dmi_product_name) {
  // The file is read only when the variable does not decide.
  if (override_value && !override_value->empty()) return decide(override_value, std::nullopt);
  return decide(std::nullopt, detect_target(dmi_product_name));
}

std::optional<std::string> target_for(const std::vector<std::string>& flags) {
  if (flags_name_target(flags)) return std::nullopt;
  auto value = util::env(kTargetOverrideVariable);
  if (value && !value->empty()) return decide(value, std::nullopt).name;
  // The machine does not change while we run.
  static const std::optional<std::string> machine = detect_target(kDmiProductNamePath);
  Target target = decide(std::nullopt, machine);
  if (target.source == TargetSource::fallback) {
    static std::once_flag warned;
    std::call_once(warned, [&] {
      spdlog::warn("cannot tell the compile target from {} (not a trn1, trn2 or inf2 instance?); compiling "
                   "for {}: set {} to one of {}, or pass --target, to choose",
                   kDmiProductNamePath, target.name, kTargetOverrideVariable, known_targets_text());
    });
  }
  return target.name;
}

} // namespace npc::compile
