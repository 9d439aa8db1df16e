#include <npc/util/trace_events.hpp>

#include <npc/util/fs.hpp>
#include <npc/util/json_text.hpp>
#include <npc/util/output_file.hpp>

namespace npc::util {

using nlohmann::json;

namespace {

// An async event's id: a string, so that a merge can make it unique across
// the files it joins ("2:17") without any chance of a clash with a number.
std::string async_id(std::uint64_t id) { return std::to_string(id); }

std::string document_text(const std::vector<json>& events, const json& other_data) {
  // One event a line: a trace of thousands of compiles stays readable with
  // grep and diffs well, and is still what json.load reads.
  std::string text = "{\"displayTimeUnit\": \"ms\",\n\"otherData\": " + to_json_text(other_data) +
                     ",\n\"traceEvents\": [\n";
  for (std::size_t i = 0; i < events.size(); ++i) {
    text += to_json_text(events[i]);
    text += i + 1 < events.size() ? ",\n" : "\n";
  }
  text += "]}\n";
  return text;
}

} // namespace

json TraceEvents::base(const char* phase, const std::string& name, std::int64_t at_us) const {
  return json{{"ph", phase}, {"name", name}, {"pid", pid_}, {"ts", at_us}};
}

void TraceEvents::name_process(const std::string& name) {
  json e = base("M", "process_name", 0);
  e.erase("ts");
  e["tid"] = 0;
  e["args"] = {{"name", name}};
  events_.push_back(std::move(e));
}

void TraceEvents::name_lane(std::int64_t lane, const std::string& name, std::int64_t sort_index) {
  json e = base("M", "thread_name", 0);
  e.erase("ts");
  e["tid"] = lane;
  e["args"] = {{"name", name}};
  events_.push_back(e);
  e["name"] = "thread_sort_index";
  e["args"] = {{"sort_index", sort_index}};
  events_.push_back(std::move(e));
}

void TraceEvents::complete(const std::string& name, const std::string& category, std::int64_t lane,
                           std::int64_t start_us, std::int64_t duration_us, json args) {
  json e = base("X", name, start_us);
  e["cat"] = category;
  e["tid"] = lane;
  e["dur"] = std::max<std::int64_t>(0, duration_us);
  if (!args.empty()) e["args"] = std::move(args);
  events_.push_back(std::move(e));
}

void TraceEvents::async_begin(const std::string& name, const std::string& category, std::uint64_t id,
                              std::int64_t at_us, json args) {
  json e = base("b", name, at_us);
  e["cat"] = category;
  e["id"] = async_id(id);
  e["tid"] = 0;
  if (!args.empty()) e["args"] = std::move(args);
  events_.push_back(std::move(e));
}

void TraceEvents::async_end(const std::string& name, const std::string& category, std::uint64_t id,
                            std::int64_t at_us) {
  json e = base("e", name, at_us);
  e["cat"] = category;
  e["id"] = async_id(id);
  e["tid"] = 0;
  events_.push_back(std::move(e));
}

void TraceEvents::counter(const std::string& name, std::int64_t at_us, json values) {
  json e = base("C", name, at_us);
  e["tid"] = 0;
  e["args"] = std::move(values);
  events_.push_back(std::move(e));
}

Status TraceEvents::write(const fs::path& path, const json& other_data) const {
  return write_output_file(path, document_text(events_, other_data));
}

Result<std::string> merge_traces(const std::vector<fs::path>& inputs) {
  std::vector<json> merged;
  json sources = json::array();
  std::int64_t pid = 0;
  for (const auto& input : inputs) {
    ++pid;
    auto text = read_file(input);
    if (!text) return fail(text.error());
    auto doc = parse_json_text(*text);
    if (!doc || !doc->is_object() || !doc->contains("traceEvents") || !(*doc)["traceEvents"].is_array())
      return fail(input.string() + " is not a trace (a JSON object with a traceEvents array)");
    for (auto& event : (*doc)["traceEvents"]) {
      if (!event.is_object()) return fail(input.string() + " has a trace event that is not a JSON object");
      event["pid"] = pid;
      if (auto id = event.find("id"); id != event.end()) *id = std::to_string(pid) + ":" + (id->is_string() ? id->get<std::string>() : id->dump());
      merged.push_back(std::move(event));
    }
    json source = {{"file", input.string()}};
    if (auto other = doc->find("otherData"); other != doc->end() && other->is_object()) source["otherData"] = *other;
    sources.push_back(std::move(source));
  }
  return document_text(merged, json{{"merged", sources}});
}

} // namespace npc::util
