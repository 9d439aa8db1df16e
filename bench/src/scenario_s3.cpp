// Scenario 8: many NEFFs to S3 and back. Our storage layer's parallel
// transfer (npc::storage::upload_files / download_files, 4 clients) against
// `rclone copy` (--transfers 4) to the same s3rver in the same run: 200 files
// of 1 MB and 10 of 200 MB, up and down, throughput and requests per file.

#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>

#include <npc/storage/s3_client.hpp>
#include <npc/storage/s3_transfer.hpp>
#include <npc/util/process.hpp>
#include <npc/util/sha256.hpp>

#include "s3rver.hpp"
#include "scenarios.hpp"

namespace bench {

namespace {

constexpr const char* kBucket = "bench";
constexpr int kTransfers = 4; // rclone's default --transfers, and ours

struct FileSet {
  std::string name; // "small", "large"
  int count = 0;
  std::uint64_t size = 0;
  fs::path dir;
  std::vector<std::string> names;
  std::vector<std::string> sha256;
  [[nodiscard]] double megabytes() const { return static_cast<double>(size) * count / 1e6; }
};

// Incompressible bytes, distinct per file.
FileSet make_files(const fs::path& dir, const std::string& name, int count, std::uint64_t size) {
  FileSet set{name, count, size, dir, {}, {}};
  make_dirs(dir);
  std::mt19937_64 rng(42);
  std::string chunk(1 << 20, '\0');
  for (int i = 0; i < count; ++i) {
    std::string file = "MODULE_" + std::to_string(i) + ".neff";
    FILE* out = std::fopen((dir / file).c_str(), "wb");
    if (out == nullptr) throw std::runtime_error("cannot create " + (dir / file).string());
    for (std::uint64_t written = 0; written < size;) {
      for (std::size_t k = 0; k < chunk.size(); k += 8) {
        std::uint64_t v = rng();
        std::memcpy(chunk.data() + k, &v, 8);
      }
      std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), size - written));
      if (std::fwrite(chunk.data(), 1, n, out) != n) throw std::runtime_error("cannot write " + file);
      written += n;
    }
    std::fclose(out);
    auto digest = npc::util::sha256_file(dir / file);
    if (!digest) throw std::runtime_error(digest.error());
    set.names.push_back(file);
    set.sha256.push_back(digest->sha256);
  }
  return set;
}

// Every downloaded file has its source's bytes (untimed).
void verify_download(const FileSet& set, const fs::path& down, const std::string& who) {
  for (std::size_t i = 0; i < set.names.size(); ++i) {
    auto digest = npc::util::sha256_file(down / set.names[i]);
    if (!digest || digest->sha256 != set.sha256[i])
      throw std::runtime_error(who + " downloaded " + set.names[i] + " with the wrong bytes");
  }
}

// Removes every object under `prefix` (untimed), so the server's disk holds
// one contender's copy at a time.
void delete_prefix(const npc::storage::S3Config& config, const std::string& prefix) {
  auto client = npc::storage::S3Client::create(config);
  if (!client) throw std::runtime_error(client.error());
  auto listed = (*client)->list_all(kBucket, {.prefix = prefix});
  if (!listed) throw std::runtime_error(listed.error());
  for (const auto& object : listed->objects)
    if (auto s = (*client)->delete_object(kBucket, object.key); !s) throw std::runtime_error(s.error());
}

struct Phase {
  double seconds = 0;
  std::size_t requests = 0;
};

json record_of(const FileSet& set, const Phase& up, const Phase& down) {
  return {{"upload_seconds", up.seconds},
          {"upload_mb_per_s", set.megabytes() / up.seconds},
          {"upload_requests_per_file", static_cast<double>(up.requests) / set.count},
          {"download_seconds", down.seconds},
          {"download_mb_per_s", set.megabytes() / down.seconds},
          {"download_requests_per_file", static_cast<double>(down.requests) / set.count}};
}

std::vector<double> ratios(const std::vector<double>& ours, const std::vector<double>& theirs) {
  std::vector<double> r;
  for (std::size_t i = 0; i < ours.size() && i < theirs.size(); ++i) r.push_back(ours[i] / theirs[i]);
  return r;
}

} // namespace

Scenario run_s3_transfer(const Context& context) {
  Scenario s;
  s.id = "s3-transfer";
  s.title = "8. Many NEFFs to S3 and back";
  s.reproduce = "bench/run.sh --only s3-transfer";
  const char* path = std::getenv("PATH");
  auto rclone = npc::util::find_executable("rclone", path ? std::optional<std::string>(path) : std::nullopt);
  if (!rclone) throw std::runtime_error("rclone is not installed: `bash tools/setup.sh` installs it");

  fs::path dir = context.options.scratch / s.id;
  make_dirs(dir);
  const bool quick = context.options.quick;
  std::vector<FileSet> sets;
  sets.push_back(make_files(dir / "src-small", "small", quick ? 40 : 200, 1'000'000));
  sets.push_back(make_files(dir / "src-large", "large", quick ? 4 : 10, quick ? 16'000'000 : 200'000'000));
  S3rver server(dir / "server", kBucket);
  const npc::storage::S3Config config = server.config();
  Environment rclone_env = rclone_environment(server);

  s.rows.clear();
  json raw = json::object();
  for (const FileSet& set : sets) {
    fs::path down = dir / ("down-" + set.name);
    auto ours = [&](int run) {
      std::string prefix = "ours/" + set.name + "/" + std::to_string(run) + "/";
      std::vector<npc::storage::S3TransferFile> up_files, down_files;
      for (const auto& name : set.names) {
        up_files.push_back({set.dir / name, prefix + name});
        down_files.push_back({down / name, prefix + name});
      }
      make_dirs(down);
      npc::storage::S3TransferOptions options{.concurrency = kTransfers};
      Phase up, dn;
      std::size_t before = server.responses_logged();
      double start = now_seconds();
      auto uploaded = npc::storage::upload_files(config, kBucket, up_files, options);
      up.seconds = now_seconds() - start;
      if (!uploaded) throw std::runtime_error(uploaded.error());
      std::size_t middle = server.responses_logged();
      up.requests = middle - before;
      start = now_seconds();
      auto downloaded = npc::storage::download_files(config, kBucket, down_files, options);
      dn.seconds = now_seconds() - start;
      if (!downloaded) throw std::runtime_error(downloaded.error());
      dn.requests = server.responses_logged() - middle;
      verify_download(set, down, "ours");
      json r = record_of(set, up, dn);
      r["client_requests"] = uploaded->requests + downloaded->requests;
      wipe(down);
      delete_prefix(config, prefix);
      return r;
    };
    auto theirs = [&](int run) {
      std::string prefix = "rclone/" + set.name + "/" + std::to_string(run);
      std::string remote = "s3bench:" + std::string(kBucket) + "/" + prefix;
      std::string transfers = std::to_string(kTransfers);
      fs::path log_file = dir / "rclone.log";
      make_dirs(down);
      Phase up, dn;
      std::size_t before = server.responses_logged();
      Timed t = run_checked({{rclone->string(), "--config", "/dev/null", "copy", "--transfers", transfers,
                              set.dir.string(), remote},
                             rclone_env, log_file, std::nullopt},
                            "rclone copy (upload)");
      up.seconds = t.seconds;
      std::size_t middle = server.responses_logged();
      up.requests = middle - before;
      t = run_checked({{rclone->string(), "--config", "/dev/null", "copy", "--transfers", transfers, remote,
                        down.string()},
                       rclone_env, log_file, std::nullopt},
                      "rclone copy (download)");
      dn.seconds = t.seconds;
      dn.requests = server.responses_logged() - middle;
      verify_download(set, down, "rclone");
      json r = record_of(set, up, dn);
      wipe(down);
      delete_prefix(config, prefix + "/");
      return r;
    };
    // The harness's rotation (see s3rver.hpp for why not `alternate`).
    std::vector<std::pair<std::string, std::function<json(int)>>> contenders = {{"rclone", theirs}, {"ours", ours}};
    std::vector<std::vector<json>> records(contenders.size());
    for (int run = 0; run < context.options.runs; ++run) {
      for (std::size_t position = 0; position < contenders.size(); ++position) {
        std::size_t i = (position + static_cast<std::size_t>(run)) % contenders.size();
        json r = contenders[i].second(run);
        r["run"] = run + 1;
        r["position"] = position + 1;
        records[i].push_back(r);
      }
      log(context, s.id + " " + set.name + ": round " + std::to_string(run + 1) + "/" +
                       std::to_string(context.options.runs) + " done");
    }
    const std::string label = count_text(static_cast<std::size_t>(set.count)) + " × " +
                              num(static_cast<double>(set.size) / 1e6, 0) + " MB";
    for (const char* direction : {"upload", "download"}) {
      std::string d = direction;
      auto theirs_mb = column(records[0], d + "_mb_per_s");
      auto ours_mb = column(records[1], d + "_mb_per_s");
      auto ratio = ratios(ours_mb, theirs_mb);
      s.rows.push_back({"`rclone copy --transfers 4` (" + d + ", " + label + ")", "throughput", "MB/s", theirs_mb,
                        "", {}, "baseline", 0});
      s.rows.push_back({"ours, 4 clients (" + d + ", " + label + ")", "throughput", "MB/s", ours_mb, "", {}, "", 0});
      Row r{"ours / rclone (" + d + ", " + label + ")", "throughput ratio", "x", ratio, "≥ 0.9× rclone", {}, "", 2};
      r.met = spread(ratio).median >= 0.9;
      s.rows.push_back(r);
      s.rows.push_back({"rclone (" + d + ", " + label + ")", "requests per file", "",
                        column(records[0], d + "_requests_per_file"), "", {}, "counted in s3rver's log", 2});
      s.rows.push_back({"ours (" + d + ", " + label + ")", "requests per file", "",
                        column(records[1], d + "_requests_per_file"), "", {}, "counted in s3rver's log", 2});
    }
    raw[set.name] = {{"rclone", records[0]}, {"ours", records[1]}};
  }
  s.raw = raw;
  s.workload = {{"small", {{"files", sets[0].count}, {"bytes_each", sets[0].size}}},
                {"large", {{"files", sets[1].count}, {"bytes_each", sets[1].size}}},
                {"transfers", kTransfers},
                {"server", "s3rver 3.7.1 (node), data on the scratch filesystem"},
                {"rclone", rclone->string()}};
  s.what =
      "Files of random bytes in the scratch directory, copied to a bucket of one s3rver (started for the scenario, "
      "its data directory in the same scratch directory, so both contenders read, and the server writes, on one "
      "filesystem) and back into an empty directory, 4 transfers at once on both sides. MB = 10^6 bytes; every "
      "file is below rclone's 200 MiB upload cutoff, so both send one PUT a file. **Ours**: "
      "`npc::storage::upload_files` / `download_files` in the driver's process (4 threads, each its own S3Client "
      "and connection); uploads stream the file once with `x-amz-content-sha256: UNSIGNED-PAYLOAD`, downloads "
      "are written to a temp name and renamed; no hashing. **rclone**: `rclone copy --transfers 4` as a process "
      "(its start, about 50 ms, is in its time), configured through RCLONE_CONFIG_* variables only; it lists the "
      "destination first, reads each file once for its MD5 (sent as Content-MD5 and compared with the ETag) and "
      "again to send it, HEADs each object after uploading it, and checks the MD5 of what it downloads. Requests "
      "are counted from the server's side: s3rver's log line per response, between the start and the end of each "
      "phase. After every run the download is checked against the sources' SHA-256 and the objects are deleted "
      "(neither timed). s3rver itself (one node process writing every object to disk) may be the bottleneck for "
      "both contenders.";
  wipe(dir / "src-small");
  wipe(dir / "src-large");
  return s;
}

} // namespace bench
