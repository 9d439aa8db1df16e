#include <npc/launcher/graph_source.hpp>

#include <spdlog/spdlog.h>

#include <npc/cache/key.hpp>
#include <npc/cluster/shared_entry_look.hpp>
#include <npc/storage/open.hpp>
#include <npc/util/error.hpp>

namespace npc::launcher {

using cluster::HeldEntryLook;
using cluster::SharedGraphs;

namespace {

// A cache named by URL, tried with one request before anything runs: keys
// it refuses, a bucket that is not there or an endpoint that does not
// answer would otherwise be met only after the trial, by the trial's
// extraction and every compile. The probe also learns whether the server
// honours create-only PUTs: where it does, each lock the launcher takes is
// one PUT, not a HEAD, a PUT, a pause and a GET, on every connection the
// same cache::Tiers opened.
void check_usable(const storage::Storage& shared, const std::string& url) {
  const storage::Probe probe = shared.probe();
  std::string what_to_do;
  switch (probe.reach) {
  case storage::Reach::usable: return;
  // The request's own line names the keys' variables, or the permission.
  case storage::Reach::credentials_refused:
  case storage::Reach::access_denied: break;
  case storage::Reach::missing:
    what_to_do = "create it, or name an existing one in NEURON_COMPILE_CACHE_URL or in --cache_dir of NEURON_CC_FLAGS";
    break;
  case storage::Reach::unreachable:
    what_to_do = "check the endpoint (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS_REGION) and that this host reaches it";
    break;
  case storage::Reach::failed: what_to_do = "run again once it answers"; break;
  }
  throw EnvironmentError("the cache " + url + " cannot be used: " + probe.detail +
                         (what_to_do.empty() ? "" : "; " + what_to_do));
}

} // namespace

GraphSource::GraphSource(const cache::Tiers& tiers, const std::string& compiler_version) : tiers_(tiers) {
  if (!tiers.shared()) return;
  const std::string& url = *tiers.shared_url();
  auto connections = tiers.connect(cluster::kSharedTierConnections);
  check_usable(*connections.front(), url);
  shared_.emplace(std::move(connections), tiers.directory(), url, compiler_version);
}

std::shared_ptr<storage::Storage> GraphSource::open_common_storage() const {
  return tiers_.shared() ? tiers_.connect().front() : tiers_.directory().storage();
}

bool GraphSource::brings(const std::string& line) const { return shared_ && storage::is_url(line); }

void GraphSource::collect(Collector& collector, const std::vector<NamedGraph>& named) {
  std::vector<std::string> urls;
  if (shared_)
    for (const auto& one : named)
      if (storage::is_url(one.text)) urls.push_back(one.text);
  std::vector<SharedGraphs::Taken> taken = shared_ ? shared_->take_all(urls) : std::vector<SharedGraphs::Taken>();
  std::size_t next_url = 0;
  for (const auto& [text, source] : named) {
    if (!storage::is_url(text)) {
      collector.add_graph_path(text, source);
    } else if (!shared_) {
      collector.refuse(text, source,
                       "a graph in a shared cache, but the launcher's cache is " + tiers_.directory().describe() +
                           " (set NEURON_COMPILE_CACHE_URL to that cache, and the launcher compiles into it)");
    } else {
      const auto& one = taken[next_url++];
      if (one.graph) collector.add_graph_path(one.graph->string(), source);
      else if (!one.refused.empty()) collector.refuse(text, source, one.refused);
    }
  }
}

void GraphSource::collect_shared_pending(Collector& collector, bool with_failed) {
  if (!shared_) return;
  for (const auto& entry : shared_->take_pending(with_failed)) collector.add_entry_dir(entry);
}

std::optional<std::uint64_t> GraphSource::graph_bytes_later(const fs::path& entry_dir) const {
  return shared_ ? shared_->brought_later(entry_dir) : std::nullopt;
}

void GraphSource::log_transfers() const {
  if (!shared_) return;
  if (shared_->results_downloaded() > 0)
    spdlog::info("{} result(s) already in {} downloaded into {}", shared_->results_downloaded(),
                 *tiers_.shared_url(), tiers_.directory().describe());
  if (shared_->results_uploaded() > 0)
    spdlog::info("{} result(s) of {} that {} lacked uploaded", shared_->results_uploaded(),
                 tiers_.directory().describe(), *tiers_.shared_url());
}

std::optional<std::string> GraphSource::held_elsewhere(const fs::path& entry_dir) const {
  return shared_ ? shared_->held_elsewhere(entry_dir) : std::nullopt;
}

std::shared_ptr<HeldEntryLook> GraphSource::held_look(bool retry_failed, cache::DownloadResult download) const {
  // Over a connection already open: the graphs are all brought by now.
  if (!shared_) return nullptr;
  return cluster::make_shared_entry_look(shared_->connection(), tiers_.connect(cluster::kTransferConnections),
                                         tiers_.directory(), retry_failed, download, shared_->version_objects(),
                                         shared_->flags_by_hash());
}

} // namespace npc::launcher
