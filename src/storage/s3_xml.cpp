#include <npc/storage/s3_xml.hpp>

#include <charconv>
#include <ctime>

namespace npc::storage {

namespace {

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

template <typename T> bool parse_number(std::string_view text, T& out, int base = 10) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
  return ec == std::errc() && end == text.data() + text.size();
}

std::string first_text(std::string_view xml, std::string_view tag) {
  auto found = xml_elements(xml, tag);
  return found.empty() ? std::string() : xml_unescape(found.front());
}

} // namespace

std::vector<std::string_view> xml_elements(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  const std::string open = "<" + std::string(tag);
  const std::string close = "</" + std::string(tag) + ">";
  std::size_t pos = 0;
  while ((pos = xml.find(open, pos)) != std::string_view::npos) {
    std::size_t after = pos + open.size();
    // "<Key" must not match "<KeyCount>".
    if (after >= xml.size() || (xml[after] != '>' && xml[after] != ' ' && xml[after] != '/')) {
      pos = after;
      continue;
    }
    std::size_t start_end = xml.find('>', after);
    if (start_end == std::string_view::npos) break;
    if (xml[start_end - 1] == '/') { // <Tag/>: empty
      out.emplace_back();
      pos = start_end + 1;
      continue;
    }
    std::size_t end = xml.find(close, start_end + 1);
    if (end == std::string_view::npos) break;
    out.push_back(xml.substr(start_end + 1, end - start_end - 1));
    pos = end + close.size();
  }
  return out;
}

std::string xml_unescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out += text[i];
      continue;
    }
    std::size_t semi = text.find(';', i);
    if (semi == std::string_view::npos) {
      out += text.substr(i);
      break;
    }
    std::string_view name = text.substr(i + 1, semi - i - 1);
    std::uint32_t cp = 0;
    if (name == "amp") out += '&';
    else if (name == "lt") out += '<';
    else if (name == "gt") out += '>';
    else if (name == "quot") out += '"';
    else if (name == "apos") out += '\'';
    else if (name.size() > 2 && name[0] == '#' && (name[1] == 'x' || name[1] == 'X') && parse_number(name.substr(2), cp, 16))
      append_utf8(out, cp);
    else if (name.size() > 1 && name[0] == '#' && parse_number(name.substr(1), cp))
      append_utf8(out, cp);
    else {
      out += text.substr(i, semi - i + 1); // not a reference we know: kept as written
    }
    i = semi;
  }
  return out;
}

std::optional<Time> parse_iso8601(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS, then optional .fraction, then Z
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' || text[16] != ':')
    return std::nullopt;
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!parse_number(text.substr(0, 4), year) || !parse_number(text.substr(5, 2), month) ||
      !parse_number(text.substr(8, 2), day) || !parse_number(text.substr(11, 2), hour) ||
      !parse_number(text.substr(14, 2), minute) || !parse_number(text.substr(17, 2), second))
    return std::nullopt;
  std::string_view rest = text.substr(19);
  long millis = 0;
  if (!rest.empty() && rest.front() == '.') {
    std::size_t digits = 1;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
    std::string_view fraction = rest.substr(1, std::min<std::size_t>(digits - 1, 3));
    if (!fraction.empty() && parse_number(fraction, millis))
      for (std::size_t n = fraction.size(); n < 3; ++n) millis *= 10;
    rest = rest.substr(digits);
  }
  if (rest != "Z") return std::nullopt;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  std::time_t seconds = ::timegm(&tm);
  return std::chrono::time_point_cast<Time::duration>(std::chrono::system_clock::from_time_t(seconds) +
                                                      std::chrono::milliseconds(millis));
}

Result<S3ListPage> parse_list_objects_v2(std::string_view xml) {
  if (xml_elements(xml, "ListBucketResult").empty())
    return fail("S3 answered a listing with no ListBucketResult: " + std::string(xml.substr(0, 200)));
  S3ListPage page;
  for (std::string_view contents : xml_elements(xml, "Contents")) {
    S3ListedObject object;
    object.key = first_text(contents, "Key");
    std::string size = first_text(contents, "Size");
    if (!parse_number(std::string_view(size), object.size))
      return fail("S3 listed " + object.key + " with a malformed size '" + size + "'");
    if (auto when = parse_iso8601(first_text(contents, "LastModified"))) object.modified = *when;
    page.objects.push_back(std::move(object));
  }
  for (std::string_view common : xml_elements(xml, "CommonPrefixes"))
    page.common_prefixes.push_back(first_text(common, "Prefix"));
  if (first_text(xml, "IsTruncated") == "true") {
    std::string token = first_text(xml, "NextContinuationToken");
    if (token.empty()) return fail("S3 said a listing was truncated but gave no NextContinuationToken");
    page.continuation_token = std::move(token);
  }
  return page;
}

S3ErrorBody parse_s3_error(std::string_view xml) {
  auto error = xml_elements(xml, "Error");
  if (error.empty()) return {};
  return S3ErrorBody{first_text(error.front(), "Code"), first_text(error.front(), "Message")};
}

} // namespace npc::storage
