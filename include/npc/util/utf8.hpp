#pragma once
// UTF-8 as it matters to us: paths, flags and a training script's output are
// bytes, and only some of them are UTF-8 text.

#include <cstddef>
#include <string>
#include <string_view>

namespace npc::util {

// Length of the valid UTF-8 sequence (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF) starting at text[i], or 0 when the byte
// there does not start one.
[[nodiscard]] std::size_t utf8_sequence_length(std::string_view text, std::size_t i);

// `text` made safe to show on a terminal: what a training script or a
// compiler printed, or a file name, can carry escape sequences (that recolour
// or rewrite the screen), carriage returns (that overwrite a line of ours),
// and bytes that are not UTF-8. Those become visible escapes: \r (and \n,
// \t in one-line form) as such; other C0 controls, DEL, C1 controls and
// bytes that are not UTF-8 as \xNN. A backslash stays a backslash (the
// escapes are for reading, not for parsing back).
// Line breaks and tabs are kept as they are for a message of several lines
// (a compiler log's tail under an error).
enum class LineBreaks { escape, keep };
[[nodiscard]] std::string printable_text(std::string_view text, LineBreaks line_breaks = LineBreaks::escape);

} // namespace npc::util
