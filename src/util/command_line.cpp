#include <npc/util/command_line.hpp>

#include <string>
#include <tuple>

#include <npc/util/error.hpp>

namespace npc::util {

void parse_command_line(CLI::App& app, int argc, char** argv) {
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

} // namespace npc::util
