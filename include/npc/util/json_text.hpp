#pragma once
// JSON text of documents whose strings are bytes: paths and compiler flags
// are bytes on Linux, a JSON string is Unicode. Every JSON file and report we
// write goes through to_json_text, every one we read through parse_json_text.
//
// The escaping (README, "Paths and flags in JSON"): a string that is valid UTF-8 is written
// exactly as nlohmann writes it. In a string that is not, each byte that is
// not part of a valid UTF-8 sequence (always 0x80..0xff) is written as the
// escape \udcXX (XX its value in lower-case hex): the lone low surrogate that
// Python's "surrogateescape" gives the same byte. So the output is valid JSON
// and valid UTF-8, nothing is lost, and torch-neuronx reading
// compile_flags.json with json.load gets the very str os.fsdecode gives for
// those bytes (os.fsencode turns it back); Python's json.dump of such a str
// writes the same escape, which parse_json_text turns back into the byte.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include <npc/util/result.hpp>

namespace npc::util {

// Whether non-ASCII characters stay raw UTF-8 or become \uXXXX escapes
// (what Python's json.dumps does by default).
enum class JsonAscii { raw, escaped };

namespace json_detail {

// Each string is carried through nlohmann (which refuses strings that are not
// UTF-8) in a private form: a byte that is not UTF-8 becomes the marker
// U+F8FF followed by its two hex digits, a real U+F8FF the marker and "--".
[[nodiscard]] std::string to_private(const std::string& bytes);
[[nodiscard]] std::string from_private(const std::string& text);
// The dumped text with each marker turned into its final escape.
[[nodiscard]] std::string private_to_escapes(std::string_view dumped, JsonAscii ascii);
// JSON text with each \udcXX escape and each raw invalid byte inside a string
// turned into the private form, ready for nlohmann's strict parser.
[[nodiscard]] std::string escapes_to_private(std::string_view text);

template <typename Json> Json map_strings(const Json& value, std::string (*convert)(const std::string&)) {
  if (value.is_string()) return Json(convert(value.template get_ref<const std::string&>()));
  if (value.is_array()) {
    Json out = Json::array();
    for (const auto& item : value) out.push_back(map_strings(item, convert));
    return out;
  }
  if (value.is_object()) {
    Json out = Json::object();
    for (auto it = value.begin(); it != value.end(); ++it) out[convert(it.key())] = map_strings(it.value(), convert);
    return out;
  }
  return value;
}

} // namespace json_detail

// The JSON text of `doc` (nlohmann's dump(indent) layout), with the escaping
// above: never throws for any bytes in any string or key.
template <typename Json>
[[nodiscard]] std::string to_json_text(const Json& doc, int indent = -1, JsonAscii ascii = JsonAscii::raw) {
  Json carried = json_detail::map_strings(doc, &json_detail::to_private);
  return json_detail::private_to_escapes(carried.dump(indent, ' ', ascii == JsonAscii::escaped), ascii);
}

// One string as a JSON string literal, with the same escaping.
[[nodiscard]] std::string json_string_text(std::string_view bytes);

// Parses JSON text, undoing the escaping: a \udcXX escape (not after a high
// surrogate) becomes the byte XX, and so does a raw byte that is not UTF-8
// inside a string (a file written by hand or by an older tool). A failure is
// a message, never an exception.
template <typename Json = nlohmann::json> [[nodiscard]] Result<Json> parse_json_text(std::string_view text) {
  Json doc = Json::parse(json_detail::escapes_to_private(text), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Failure{"not valid JSON"};
  return json_detail::map_strings(doc, &json_detail::from_private);
}

} // namespace npc::util
