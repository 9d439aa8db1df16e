// Scenario 6: hashing. MB/s of the cache-key computation on a 1 GiB graph:
// the core library's streaming SHA-256 over the file (in this process), and
// the whole `neuron_cc_wrapper key` command (process start, reading the
// graph, hashing it, printing the key).

#include <fcntl.h>
#include <unistd.h>

#include <openssl/opensslv.h> // the version of the libcrypto.a linked in

#include <npc/util/sha256.hpp>

#include "fixtures.hpp"
#include "scenarios.hpp"

namespace bench {

Scenario run_hashing(const Context& context) {
  Scenario s;
  s.id = "hashing";
  s.title = "6. Hashing";
  s.reproduce = "bench/run.sh --only hashing";
  fs::path dir = context.options.scratch / s.id;
  make_dirs(dir);
  const std::uint64_t size = context.options.quick ? (256ull << 20) : (1ull << 30);
  fs::path graph = dir / "big.hlo";
  {
    // HLO-like text, one line repeated with a counter so no block repeats.
    std::string chunk;
    chunk.reserve(1 << 20);
    std::uint64_t line = 0;
    int fd = ::open(graph.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("cannot create " + graph.string());
    std::uint64_t written = 0;
    while (written < size) {
      chunk.clear();
      while (chunk.size() < (1u << 20) - 128) {
        ++line;
        chunk += "  %v" + std::to_string(line) + " = f32[1024,1024]{1,0} add(%v" + std::to_string(line - 1) +
                 ", %p0)\n";
      }
      std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), size - written));
      if (::write(fd, chunk.data(), n) != static_cast<ssize_t>(n)) {
        ::close(fd);
        throw std::runtime_error("cannot write " + graph.string());
      }
      written += n;
    }
    ::close(fd);
  }
  const double mb = static_cast<double>(size) / 1e6;

  fs::path cache = dir / "cache";
  Environment env = clean_environment(context.programs, cache);
  // A tiny extraction creates the cache and its compiler-version memo, so the
  // key command does not have to ask the compiler for its version.
  {
    fs::path tiny = dir / "tiny.hlo";
    write_text(tiny, "HloModule tiny\n");
    Environment extract = env;
    extract.set("NEURON_EXTRACT_GRAPHS_ONLY", "1");
    std::ignore = run_checked({{context.programs.wrapper.string(), "compile", "--graph", tiny.string(), "--output",
                                (dir / "tiny.neff").string()},
                               extract, dir / "extract.log", std::nullopt},
                              "extracting a tiny graph");
  }
  // Warm the page cache once, so every run reads from memory.
  std::ignore = npc::util::sha256_file(graph);

  // For reference: the hash alone, over bytes already in this process's memory.
  std::string buffer(std::min<std::uint64_t>(size, 256ull << 20), 'x');
  for (std::size_t i = 0; i < buffer.size(); i += 4096) buffer[i] = static_cast<char>(i / 4096);
  const double buffer_mb = static_cast<double>(buffer.size()) / 1e6;
  std::vector<Contender> contenders = {
      {"memory", nullptr,
       [&](int) {
         double start = now_seconds();
         npc::util::Sha256 sha;
         sha.update(buffer);
         std::string digest = sha.hex_digest();
         double seconds = now_seconds() - start;
         return json{{"seconds", seconds}, {"mb_per_s", buffer_mb / seconds}, {"bytes", buffer.size()}};
       }},
      {"library", nullptr,
       [&](int) {
         double start = now_seconds();
         auto digest = npc::util::sha256_file(graph);
         double seconds = now_seconds() - start;
         if (!digest) throw std::runtime_error(digest.error());
         return json{{"seconds", seconds}, {"mb_per_s", mb / seconds}, {"sha256", digest->sha256}};
       }},
      {"wrapper-key", nullptr,
       [&](int) {
         Timed t = run_checked_rss(context, {{context.programs.wrapper.string(), "key", "--graph", graph.string()},
                                             env, dir / "key.log", std::nullopt},
                                   "neuron_cc_wrapper key");
         return json{{"seconds", t.seconds},
                     {"mb_per_s", mb / t.seconds},
                     {"peak_rss_bytes", t.status.peak_rss_bytes}};
       }},
  };
  auto records = alternate(context, s.id, contenders);

  bool sha_ni = false;
  {
    std::string cpuinfo = read_text("/proc/cpuinfo");
    sha_ni = cpuinfo.find(" sha_ni") != std::string::npos || cpuinfo.find(" sha2") != std::string::npos;
  }
  std::vector<double> raw = column(records[0], "mb_per_s");
  std::vector<double> lib = column(records[1], "mb_per_s");
  std::vector<double> key = column(records[2], "mb_per_s");
  Row lib_row{"SHA-256 in the core library (npc::util::sha256_file, 1 MiB reads)", "throughput", "MB/s", lib, "", {},
              "", 0};
  Row key_row{"`neuron_cc_wrapper key --graph` (whole command)", "throughput", "MB/s", key, "", {}, "", 0};
  if (sha_ni) {
    lib_row.target = "≥ 1000 MB/s (CPU has SHA extensions)";
    lib_row.met = spread(lib).median >= 1000;
    key_row.target = lib_row.target;
    key_row.met = spread(key).median >= 1000;
    if (!*lib_row.met) lib_row.note = "OpenSSL's SHA-256 on this CPU, plus copying from the page cache";
    if (!*key_row.met) {
      std::vector<double> rss = column(records[2], "peak_rss_bytes");
      key_row.note = "the whole command: its process start and the compiler version lookup, then the graph "
                     "hashed in 1 MiB reads (peak RSS " +
                     num(spread(rss).median / kMiB, 0) + " MiB)";
    }
  } else {
    lib_row.note = "no SHA extensions on this CPU: the 1 GB/s target does not apply";
  }
  s.rows.push_back({"reference: SHA-256 of bytes already in memory (npc::util::Sha256, " +
                        num(buffer_mb, 0) + " MB)",
                    "throughput", "MB/s", raw, "", {}, "the CPU's hashing speed alone, no reading", 0});
  s.rows.push_back(lib_row);
  s.rows.push_back(key_row);
  s.rows.push_back({"`neuron_cc_wrapper key --graph` (whole command)", "peak RSS", "MiB",
                    [&] {
                      std::vector<double> v;
                      for (double b : column(records[2], "peak_rss_bytes")) v.push_back(b / kMiB);
                      return v;
                    }(),
                    "", {}, "the graph is hashed in 1 MiB reads, never held whole", 0});
  s.workload = {{"graph_bytes", size},
                {"cpu_sha_extensions", sha_ni},
                {"openssl", OPENSSL_VERSION_TEXT},
                {"page_cache", "warm (the file is read once before the runs)"}};
  s.raw = {{"in_memory", records[0]}, {"library", records[1]}, {"wrapper_key", records[2]}};
  s.what = "A " + num(static_cast<double>(size) / (1 << 30), 2) +
           " GiB HLO-like text graph in the page cache. MB = 10^6 bytes. The key of a graph is the SHA-256 of its "
           "bytes (through OpenSSL's EVP interface, which uses the CPU's SHA extensions when present). This CPU " +
           std::string(sha_ni ? "**has**" : "does **not** have") +
           " SHA extensions (`sha_ni` in /proc/cpuinfo). The library row hashes the file in this process with the "
           "same function the cache uses to check NEFFs; the wrapper row is the whole `neuron_cc_wrapper key` "
           "command, which computes the key exactly as a compile does.";
  wipe(graph);
  return s;
}

} // namespace bench
