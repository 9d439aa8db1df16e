#include <npc/storage/s3_config.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>


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
  } else {
    return fail("no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give profile '" +
                profile + "' aws_access_key_id and aws_secret_access_key in " + where +
                " (instance-role credentials are not read yet)");
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
