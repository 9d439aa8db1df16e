#include <npc/util/command_line.hpp>

#include <charconv>
#include <string>
#include <tuple>

#include <npc/util/bash_completion.hpp>
#include <npc/util/error.hpp>

namespace npc::util {

void parse_command_line(CLI::App& app, int argc, char** argv) {
  print_bash_completion_if_asked(app, argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::ignore = app.exit(e);
    throw Error("", ExitCode::success);
  } catch (const CLI::CallForAllHelp& e) {
    std::ignore = app.exit(e);
    throw Error("", ExitCode::success);
  } catch (const CLI::CallForVersion& e) {
    std::ignore = app.exit(e);
    throw Error("", ExitCode::success);
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string(e.what()) + " (run with --help for usage)");
  }
}

CLI::Validator whole_number(long long min, long long max) {
  std::string range = std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        long long value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size())
          return "'" + text + "' is not a whole number (give " + range + ")";
        if (ec == std::errc::result_out_of_range || value < min || value > max)
          return text + " is out of range (give " + range + ")";
        return {};
      },
      "INT in [" + range + "]");
}

} // namespace npc::util
