#pragma once
// The few S3 responses we read: a ListObjectsV2 page and an error. S3's XML
// is flat and machine-written (no comments, no CDATA, no nesting of an
// element in itself), so finding elements by name is enough and needs no
// XML library.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/storage/storage.hpp>

namespace npc::storage {

struct S3ListedObject {
  std::string key;
  std::uint64_t size = 0;
  Time modified;
};

struct S3ListPage {
  std::vector<S3ListedObject> objects;
  std::vector<std::string> common_prefixes;
  // Set when there are more: pass it back for the next page.
  std::optional<std::string> continuation_token;
};

struct S3ErrorBody {
  std::string code;    // "NoSuchKey", "AccessDenied", ...; "" when not S3's XML
  std::string message;
};

// The text inside each <tag>...</tag> (or <tag attr="...">) of `xml`, in
// order, entities not yet decoded.
[[nodiscard]] std::vector<std::string_view> xml_elements(std::string_view xml, std::string_view tag);
// &amp; &lt; &gt; &quot; &apos; and numeric references, as UTF-8.
[[nodiscard]] std::string xml_unescape(std::string_view text);
// "2024-05-01T12:34:56.000Z" to a time; nothing when malformed.
[[nodiscard]] std::optional<Time> parse_iso8601(std::string_view text);

[[nodiscard]] Result<S3ListPage> parse_list_objects_v2(std::string_view xml);
[[nodiscard]] S3ErrorBody parse_s3_error(std::string_view xml);

} // namespace npc::storage
