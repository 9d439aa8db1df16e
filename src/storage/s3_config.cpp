#include <npc/storage/s3_config.hpp>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include <npc/storage/curl_library.hpp>

namespace npc::storage {

namespace {

using Section = std::map<std::string, std::string>;
using Ini = std::map<std::string, Section>;

std::string trim(std::string_view text) {
  std::size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return {};
  std::size_t end = text.find_last_not_of(" \t\r");
  return std::string(text.substr(begin, end - begin + 1));
}

// The AWS shared files: [section] and key = value lines, '#' and ';'
// comments. An indented line continues a key with an empty value (the
// "s3 =" sub-settings); those are service-specific and skipped here.
std::optional<Ini> read_ini(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  Ini ini;
  Section* section = nullptr;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && (line[0] == ' ' || line[0] == '\t')) continue;
    std::string text = trim(line);
    if (text.empty() || text[0] == '#' || text[0] == ';') continue;
    if (text.front() == '[' && text.back() == ']') {
      section = &ini[trim(std::string_view(text).substr(1, text.size() - 2))];
      continue;
    }
    std::size_t eq = text.find('=');
    if (section == nullptr || eq == std::string::npos) continue;
    (*section)[trim(std::string_view(text).substr(0, eq))] = trim(std::string_view(text).substr(eq + 1));
  }
  return ini;
}

const Section* find_section(const std::optional<Ini>& ini, const std::string& name) {
  if (!ini) return nullptr;
  auto it = ini->find(name);
  return it == ini->end() ? nullptr : &it->second;
}

std::string value_of(const Section* section, const std::string& key) {
  if (section == nullptr) return {};
  auto it = section->find(key);
  return it == section->end() ? std::string() : it->second;
}

std::string non_empty(const EnvLookup& env, std::string_view name) {
  auto value = env(name);
  return value ? *value : std::string();
}

bool has_keys(const Section* section) {
  return !value_of(section, "aws_access_key_id").empty() && !value_of(section, "aws_secret_access_key").empty();
}

S3Credentials keys_of(const Section* section) {
  return S3Credentials{value_of(section, "aws_access_key_id"), value_of(section, "aws_secret_access_key"),
                       value_of(section, "aws_session_token")};
}

// ---- EC2 instance metadata (IMDSv2) ------------------------------------------

// Where EC2 serves it (link-local, on every instance).
constexpr const char* kImdsDefaultEndpoint = "http://169.254.169.254";
// IMDS answers in milliseconds; a machine without it (a laptop, a CI
// runner) must not be held up long, since it is asked last, only when no
// keys are set. Two tries in all: one retry covers a dropped packet.
constexpr long kImdsConnectTimeoutMs = 1000;
constexpr long kImdsTimeoutMs = 2000;
constexpr int kImdsAttempts = 2;
// The longest token IMDS grants (6 h); we use it at once, but a short TTL
// buys nothing.
constexpr const char* kImdsTokenTtlSeconds = "21600";
// Its answers are a token, a role name, a small JSON document.
constexpr std::size_t kImdsMaxBody = 64 * 1024;

struct ImdsAnswer {
  long status = 0;
  std::string body;
};

std::size_t collect_body(char* ptr, std::size_t size, std::size_t count, void* user) {
  auto& body = *static_cast<std::string*>(user);
  std::size_t n = size * count;
  if (body.size() + n > kImdsMaxBody) return 0; // not IMDS: stop reading
  body.append(ptr, n);
  return n;
}

struct CurlEasy {
  explicit CurlEasy(const CurlLibrary& lib_) : lib(lib_), curl(lib.easy_init()) {}
  CurlEasy(const CurlEasy&) = delete;
  CurlEasy& operator=(const CurlEasy&) = delete;
  ~CurlEasy() { lib.easy_cleanup(curl); }
  const CurlLibrary& lib;
  CURL* curl;
};

struct CurlHeaders {
  explicit CurlHeaders(const CurlLibrary& lib_) : lib(lib_) {}
  CurlHeaders(const CurlHeaders&) = delete;
  CurlHeaders& operator=(const CurlHeaders&) = delete;
  ~CurlHeaders() { lib.slist_free_all(list); }
  const CurlLibrary& lib;
  curl_slist* list = nullptr;
};

// One request to IMDS, tried kImdsAttempts times on a transport failure or
// a 5xx; the failure is a phrase for the missing-credentials message.
Result<ImdsAnswer> imds_request(const std::string& url, const char* method, const std::vector<std::string>& headers) {
  // Loads libcurl and runs curl_global_init, once per process.
  auto loaded = load_curl_library();
  if (!loaded) return fail(loaded.error());
  const CurlLibrary& lib = **loaded;
  std::string reason;
  for (int attempt = 1; attempt <= kImdsAttempts; ++attempt) {
    CurlEasy easy(lib);
    if (easy.curl == nullptr) return fail("libcurl did not start");
    CurlHeaders list(lib);
    for (const auto& h : headers) list.list = lib.slist_append(list.list, h.c_str());
    ImdsAnswer answer;
    char error_buffer[CURL_ERROR_SIZE] = {};
    lib.easy_setopt(easy.curl, CURLOPT_URL, url.c_str());
    lib.easy_setopt(easy.curl, CURLOPT_CUSTOMREQUEST, method);
    lib.easy_setopt(easy.curl, CURLOPT_HTTPHEADER, list.list);
    // A proxy from http_proxy cannot reach a link-local address: AWS's own
    // SDKs never send IMDS requests through one either.
    lib.easy_setopt(easy.curl, CURLOPT_NOPROXY, "*");
    lib.easy_setopt(easy.curl, CURLOPT_NOSIGNAL, 1L);
    lib.easy_setopt(easy.curl, CURLOPT_CONNECTTIMEOUT_MS, kImdsConnectTimeoutMs);
    lib.easy_setopt(easy.curl, CURLOPT_TIMEOUT_MS, kImdsTimeoutMs);
    lib.easy_setopt(easy.curl, CURLOPT_ERRORBUFFER, error_buffer);
    lib.easy_setopt(easy.curl, CURLOPT_WRITEFUNCTION, collect_body);
    lib.easy_setopt(easy.curl, CURLOPT_WRITEDATA, &answer.body);
    CURLcode code = lib.easy_perform(easy.curl);
    if (code == CURLE_OK) {
      lib.easy_getinfo(easy.curl, CURLINFO_RESPONSE_CODE, &answer.status);
      if (answer.status < 500 || attempt == kImdsAttempts) return answer;
      continue;
    }
    long os_errno = 0;
    lib.easy_getinfo(easy.curl, CURLINFO_OS_ERRNO, &os_errno);
    reason = code == CURLE_COULDNT_CONNECT && os_errno != 0 ? std::strerror(static_cast<int>(os_errno))
             : error_buffer[0] != '\0'                      ? std::string(error_buffer)
                                                            : lib.easy_strerror(code);
  }
  return fail("not reachable: " + reason);
}

std::string first_line(const std::string& text) { return trim(text.substr(0, text.find('\n'))); }

// IMDS's "Expiration", "2026-11-24T18:00:00Z" (UTC); nullopt for anything
// else, and then the keys are renewed only when a request is refused.
std::optional<std::chrono::system_clock::time_point> parse_expiration(const std::string& text) {
  std::tm tm{};
  char zone = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &zone) != 7 ||
      zone != 'Z')
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const std::time_t seconds = ::timegm(&tm);
  if (seconds == static_cast<std::time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(seconds);
}

// The credentials of the instance's role, by IMDSv2: a session token first,
// then the role's name, then its keys. No IMDSv1 fallback (plain GETs
// without a token): an instance that refuses tokens has been set up to
// refuse credentials by the old protocol too, or is not EC2.
Result<S3Credentials> instance_role_credentials(const std::string& endpoint) {
  auto token = imds_request(endpoint + "/latest/api/token", "PUT",
                            {std::string("X-aws-ec2-metadata-token-ttl-seconds: ") + kImdsTokenTtlSeconds});
  if (!token) return fail(token.error());
  if (token->status != 200)
    return fail("PUT /latest/api/token answered " + std::to_string(token->status) +
                " (no IMDSv2 session token; IMDSv1 is not tried)");
  std::vector<std::string> with_token{"X-aws-ec2-metadata-token: " + first_line(token->body)};

  const std::string roles_path = "/latest/meta-data/iam/security-credentials/";
  auto roles = imds_request(endpoint + roles_path, "GET", with_token);
  if (!roles) return fail(roles.error());
  if (roles->status == 404) return fail("no instance role is attached (GET " + roles_path + " answered 404)");
  std::string role = first_line(roles->body);
  if (roles->status != 200 || role.empty())
    return fail("GET " + roles_path + " answered " + std::to_string(roles->status) + " without a role name");

  auto keys = imds_request(endpoint + roles_path + role, "GET", with_token);
  if (!keys) return fail(keys.error());
  if (keys->status != 200) return fail("GET " + roles_path + role + " answered " + std::to_string(keys->status));
  auto json = nlohmann::json::parse(keys->body, nullptr, /*allow_exceptions=*/false);
  auto text = [&](const char* name) {
    auto it = json.is_object() ? json.find(name) : json.end();
    return it != json.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  // IMDS says "Success" when it has keys; an older answer may omit Code.
  std::string code = text("Code");
  if (!code.empty() && code != "Success")
    return fail("the keys of role '" + role + "' are not available (Code " + code + ")");
  S3Credentials credentials{text("AccessKeyId"), text("SecretAccessKey"), text("Token"),
                            parse_expiration(text("Expiration"))};
  if (credentials.access_key_id.empty() || credentials.secret_access_key.empty())
    return fail("GET " + roles_path + role + " gave no AccessKeyId and SecretAccessKey");
  return credentials;
}

bool is_true(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text == "true";
}

// Instance-role credentials, or why there are none, as a phrase that names
// where we looked.
Result<S3Credentials> credentials_from_instance_metadata(const std::string& endpoint) {
  auto credentials = instance_role_credentials(endpoint);
  if (!credentials) return fail("instance metadata at " + endpoint + ": " + credentials.error());
  return credentials;
}

// Where IMDS is, or why it is not asked.
Result<std::string> instance_metadata_endpoint(const EnvLookup& env) {
  if (is_true(non_empty(env, "AWS_EC2_METADATA_DISABLED")))
    return fail("instance metadata not asked: AWS_EC2_METADATA_DISABLED=true");
  std::string endpoint = non_empty(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (endpoint.empty()) endpoint = kImdsDefaultEndpoint;
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  return endpoint;
}

// The instance role's credentials, with how to fetch them again.
Result<S3Config> instance_role_config(const EnvLookup& env) {
  auto endpoint = instance_metadata_endpoint(env);
  if (!endpoint) return fail(endpoint.error());
  auto credentials = credentials_from_instance_metadata(*endpoint);
  if (!credentials) return fail(credentials.error());
  S3Config config;
  config.credentials = std::move(*credentials);
  config.renew_credentials = [endpoint = *endpoint] { return credentials_from_instance_metadata(endpoint); };
  return config;
}

} // namespace

EnvLookup process_environment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  };
}

Result<S3Config> load_s3_config(const EnvLookup& env) {
  std::string home = non_empty(env, "HOME");
  std::string credentials_file = non_empty(env, "AWS_SHARED_CREDENTIALS_FILE");
  if (credentials_file.empty() && !home.empty()) credentials_file = home + "/.aws/credentials";
  std::string config_file = non_empty(env, "AWS_CONFIG_FILE");
  if (config_file.empty() && !home.empty()) config_file = home + "/.aws/config";
  std::string explicit_profile = non_empty(env, "AWS_PROFILE");
  std::string profile = explicit_profile.empty() ? "default" : explicit_profile;

  std::optional<Ini> credentials_ini = credentials_file.empty() ? std::nullopt : read_ini(credentials_file);
  std::optional<Ini> config_ini = config_file.empty() ? std::nullopt : read_ini(config_file);
  const Section* credentials_section = find_section(credentials_ini, profile);
  // The config file names every profile but the default one "profile NAME".
  const Section* config_section = find_section(config_ini, profile == "default" ? profile : "profile " + profile);

  std::string where = "'" + (credentials_file.empty() ? std::string("~/.aws/credentials (HOME unset)") : credentials_file) +
                      "' or '" + (config_file.empty() ? std::string("~/.aws/config (HOME unset)") : config_file) + "'";
  if (!explicit_profile.empty() && credentials_section == nullptr && config_section == nullptr)
    return fail("AWS_PROFILE=" + profile + " but no profile '" + profile + "' is in " + where);

  S3Config config;
  std::string key_id = non_empty(env, "AWS_ACCESS_KEY_ID");
  std::string secret = non_empty(env, "AWS_SECRET_ACCESS_KEY");
  if (!key_id.empty() && !secret.empty()) {
    config.credentials = S3Credentials{key_id, secret, non_empty(env, "AWS_SESSION_TOKEN")};
  } else if (has_keys(credentials_section)) {
    config.credentials = keys_of(credentials_section);
  } else if (has_keys(config_section)) {
    config.credentials = keys_of(config_section);
  } else if (auto role = instance_role_config(env); role) {
    config = std::move(*role);
  } else {
    return fail("no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give profile '" +
                profile + "' aws_access_key_id and aws_secret_access_key in " + where +
                ", or run on an EC2 instance with a role (" + role.error() + ")");
  }

  config.region = non_empty(env, "AWS_REGION");
  if (config.region.empty()) config.region = non_empty(env, "AWS_DEFAULT_REGION");
  if (config.region.empty()) config.region = value_of(config_section, "region");
  if (config.region.empty()) config.region = "us-east-1";

  config.endpoint = non_empty(env, "AWS_ENDPOINT_URL_S3");
  if (config.endpoint.empty()) config.endpoint = non_empty(env, "AWS_ENDPOINT_URL");
  if (config.endpoint.empty()) config.endpoint = value_of(config_section, "endpoint_url");
  while (!config.endpoint.empty() && config.endpoint.back() == '/') config.endpoint.pop_back();
  return config;
}

} // namespace npc::storage
