#pragma once
// Logging setup: spdlog at info by default with a short pattern on stderr
// ("<program>: warning: <message>"); debug adds time and pid.

#include <string>
#include <string_view>

namespace npc::util {

enum class LogLevel { debug, info, warning, error };

// "DEBUG"/"INFO"/"WARNING"/"WARN"/"ERROR", any case; false on anything else.
[[nodiscard]] bool parse_log_level(std::string_view text, LogLevel& level);

void setup_logging(const std::string& program, LogLevel level);
void set_log_level(LogLevel level);
// Every line after this names who speaks after the program's name
// ("neuron_parallel_compile: task 2/4 node-a: ..."); empty: nobody.
void set_log_context(std::string_view context);
// That context as lines start with it ("task 2/4 node-a: "), or "": for
// lines written past the logger (the launcher's progress).
[[nodiscard]] const std::string& log_context();

// Logged as info whatever the level: lines scripts depend on (the original's
// "Total graphs: N") stay under --log_level WARNING or ERROR, which hide
// the routine lines around them.
void log_always(std::string_view line);

} // namespace npc::util
