#include <npc/util/log.hpp>

#include <memory>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <npc/util/strings.hpp>
#include <npc/util/utf8.hpp>

namespace npc::util {

namespace {

// "%*" prints "warning: " or "error: " before such messages and nothing
// before info, so ordinary progress reads as plain text.
class SeverityPrefix final : public spdlog::custom_flag_formatter {
public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string_view prefix;
    switch (msg.level) {
    case spdlog::level::warn: prefix = "warning: "; break;
    case spdlog::level::err:
    case spdlog::level::critical: prefix = "error: "; break;
    case spdlog::level::debug:
    case spdlog::level::trace: prefix = "debug: "; break;
    default: break;
    }
    dest.append(prefix.data(), prefix.data() + prefix.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<SeverityPrefix>();
  }
};

// "%&" is the message as a terminal may show it (util::printable_text): a
// path or a line of the training script's or compiler's output that we quote
// must not recolour the screen or overwrite a line of ours. Line breaks stay:
// an error may carry the last lines of a compiler's log under it.
class PrintablePayload final : public spdlog::custom_flag_formatter {
public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string_view payload(msg.payload.data(), msg.payload.size());
    std::string shown = printable_text(payload, LineBreaks::keep);
    dest.append(shown.data(), shown.data() + shown.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<PrintablePayload>();
  }
};

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
  case LogLevel::debug: return spdlog::level::debug;
  case LogLevel::info: return spdlog::level::info;
  case LogLevel::warning: return spdlog::level::warn;
  case LogLevel::error: return spdlog::level::err;
  }
  return spdlog::level::info;
}

LogLevel& current_level() {
  static LogLevel level = LogLevel::info;
  return level;
}

// Who is speaking, after the program's name ("task 2/4 node-a: "): as
// text, and as spdlog pattern text.
std::string& context_text() {
  static std::string text;
  return text;
}
std::string& context_pattern() {
  static std::string pattern;
  return pattern;
}

void apply_pattern(LogLevel level) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<SeverityPrefix>('*');
  formatter->add_flag<PrintablePayload>('&');
  const std::string& context = context_pattern();
  formatter->set_pattern(level == LogLevel::debug ? "%n [%H:%M:%S.%e pid %P] " + context + "%*%&"
                                                  : "%n: " + context + "%*%&");
  spdlog::set_formatter(std::move(formatter));
}

} // namespace

bool parse_log_level(std::string_view text, LogLevel& level) {
  auto v = to_lower(text);
  if (v == "debug") level = LogLevel::debug;
  else if (v == "info") level = LogLevel::info;
  else if (v == "warning" || v == "warn") level = LogLevel::warning;
  else if (v == "error") level = LogLevel::error;
  else return false;
  return true;
}

void setup_logging(const std::string& program, LogLevel level) {
  auto logger = std::make_shared<spdlog::logger>(
      program, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  spdlog::set_default_logger(logger);
  set_log_level(level);
}

void set_log_level(LogLevel level) {
  current_level() = level;
  spdlog::set_level(to_spdlog(level));
  apply_pattern(level);
}

void set_log_context(std::string_view context) {
  std::string text = printable_text(context, LineBreaks::escape);
  std::string pattern;
  for (char c : text) {
    if (c == '%') pattern += '%'; // spdlog's pattern: "%%" is a percent sign
    pattern += c;
  }
  context_text() = text.empty() ? std::string() : text + ": ";
  context_pattern() = pattern.empty() ? std::string() : pattern + ": ";
  apply_pattern(current_level());
}

const std::string& log_context() { return context_text(); }

void log_always(std::string_view line) {
  auto logger = spdlog::default_logger();
  // Through the logger's own sinks and pattern, past its level check.
  spdlog::details::log_msg msg(logger->name(), spdlog::level::info, line);
  for (const auto& sink : logger->sinks()) sink->log(msg);
  logger->flush();
}

} // namespace npc::util
