#include "compile.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <memory>

#include "compile_log.h"
#include "cost.h"
#include "error.h"
#include "faults.h"
#include "files.h"
#include "invocation_log.h"
#include "memory_ledger.h"
#include "neff.h"
#include "neff_writer.h"
#include "sha256.h"

namespace standin::cc {
namespace {

// neuronx-cc's status for an internal compiler error (EX_SOFTWARE).
constexpr int kExitInternalError = 70;
constexpr char kStatusPass[] = "Compiler status PASS";
constexpr char kStatusError[] = "Compiler status ERROR";
// Logged in place of the hash when the graph cannot even be read.
constexpr char kUnreadableSha[] = "-";

[[noreturn]] void die_by_signal(int signal_number) {
  // No core file: an injected crash is expected and a core dump would be
  // slow and litter the test's working directory.
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  ::signal(signal_number, SIG_DFL);
  raise(signal_number);
  _exit(128 + signal_number);  // not reached: the default action ends us
}

[[noreturn]] void hang_forever() {
  for (;;) pause();
}

std::string graph_label(const CompileRequest& request, const std::string& graph) {
  return "'" + request.graph_path + "' (" + std::to_string(graph.size()) + " bytes)";
}

// Injects a fault that strikes mid-compile; returns the exit status for
// those that end with one.
int inject_failure(Fault fault, CompileLog& log, const std::string& label) {
  switch (fault) {
    case Fault::kSigkill: die_by_signal(SIGKILL);
    case Fault::kSegv: die_by_signal(SIGSEGV);
    case Fault::kHang: hang_forever();
    case Fault::kExit70:
      log.error("neuronx-cc: internal compiler error while compiling " + label +
                " (injected by STANDIN_CC_FAULT=exit70)");
      log.error(kStatusError);
      return kExitInternalError;
    default:
      log.error("neuronx-cc: error: compilation of " + label +
                " failed (injected by STANDIN_CC_FAULT=fail)");
      log.error(kStatusError);
      return kExitFailure;
  }
}

}  // namespace

int run_compile(const CompileRequest& request, const Settings& settings) {
  std::string graph;
  try {
    graph = read_file(request.graph_path, "graph file");
  } catch (const StandinError&) {
    if (settings.invocation_log) log_invocation(*settings.invocation_log, kUnreadableSha, request.graph_path);
    throw;
  }
  const std::string graph_sha = sha256_hex(graph);
  if (settings.invocation_log) log_invocation(*settings.invocation_log, graph_sha, request.graph_path);

  CompileLog log(request.logfile);
  const std::string label = graph_label(request, graph);
  const CostPlan plan = plan_cost(settings, graph);

  std::unique_ptr<MemoryLedger> ledger;
  if (settings.memory_budget) {
    ledger = std::make_unique<MemoryLedger>(*settings.memory_ledger, *settings.memory_budget);
    ledger->reserve_or_die(plan.memory_bytes);
  }
  const Fault fault = fault_for_attempt(settings, graph, graph_sha);

  log.info("INFO: NeuronX Compiler version " + settings.version);
  log.info("INFO: compiling " + label + " for target " + request.target + " -> '" +
           request.output_path + "'");
  log.info("INFO: estimated compile time " + std::to_string(plan.cost_ms) + " ms, peak memory " +
           std::to_string(plan.memory_bytes) + " bytes");
  const MemoryHold memory(plan.memory_bytes);

  if (fault == Fault::kHang) hang_forever();
  if (fault != Fault::kNone && fault != Fault::kTruncate) {
    spend(settings.mode, plan.cost_ms / 2);
    return inject_failure(fault, log, label);
  }
  spend(settings.mode, plan.cost_ms);

  const NeffHeader header{settings.version, graph_sha, graph.size(), request.flag_words, request.target};
  const std::string neff = build_neff(header);
  if (fault == Fault::kTruncate) {
    // What a real compiler leaves when the disk fills while it writes: half
    // a NEFF at the output path, and a failure.
    write_neff_in_place(request.output_path, neff.substr(0, neff.size() / 2));
    log.error("ERROR: writing '" + request.output_path + "': No space left on device");
    log.error(kStatusError);
    return 1;
  } else {
    write_neff_atomically(request.output_path, neff);
  }
  log.info(".");
  log.info(kStatusPass);
  return 0;
}

}  // namespace standin::cc
