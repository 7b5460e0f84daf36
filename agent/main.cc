// podshaper-agent: measures a GPU node's topology with NVML and CUDA.
#include <fstream>
#include <iostream>
#include <string>

#include "agent/backend.h"
#include "agent/gpu_recording.h"
#include "agent/memlock_probe.h"
#include "agent/run.h"
#include "cli/flags.h"
#include "cli/logging.h"

namespace {

constexpr const char* kUsage = R"(usage:
  podshaper-agent probe [--fixture FILE [--p2p-fixture FILE] | --recording FILE] [--format json|table]
                        [--measure-bandwidth]
  podshaper-agent record [--output FILE]
  podshaper-agent run --node NAME [--fixture FILE [--p2p-fixture FILE] | --recording FILE] [--kubeconfig FILE]
                      [--interval S] [--heartbeat S] [--once] [--listen HOST:PORT]
                      [--memlock-probe-file FILE [--memlock-probe-pod NAMESPACE/NAME]
                       [--memlock-requested unlimited|QUANTITY] [--memlock-probe-wait S]]
  podshaper-agent memlock-probe --output FILE

  --fixture FILE       the fake backend: a captured `nvidia-smi topo -m` output (optionally
                       followed by `nvidia-smi topo -p2p r`) instead of NVML and CUDA
  --p2p-fixture FILE   with --fixture: the same node's `nvidia-smi topo -p2p r` output, for
                       the P2P status of each pair (else U, unknown)
  --recording FILE     what NVML, CUDA and sysfs answered on a node (`record`'s output),
                       answered again: the real backend's code without a GPU
  record               asks NVML, CUDA and sysfs everything probe may ask and writes their
                       answers as JSON (to stdout, or --output FILE): attach it to a bug report
  --memlock-probe-file FILE
                       what the pod's memlock-probe container wrote: the node's memlock, in
                       place of the agent's own getrlimit
  --memlock-probe-pod NAMESPACE/NAME
                       the agent's pod: its memlock-probe container's status says when the
                       runtime could not start it with the memlock asked (not granted)
  --memlock-requested unlimited|QUANTITY
                       the memlock the probe's NRI annotation asks for (default unlimited)
  --memlock-probe-wait S
                       how long the first report waits to hear from the probe (default 30)
  --listen HOST:PORT   serve /healthz, /readyz (ready once a report reached the API server)
                       and /metrics over TLS with a self-signed certificate
  memlock-probe        writes its RLIMIT_MEMLOCK to --output FILE, then waits for SIGTERM

Every command also takes --log-level trace|debug|info|warn|error (info) and
--log-format text|json (text; json: one object a line, the time in UTC).
)";

int probe(int argc, char** argv) {
  auto flags = podshaper::cli::Flags::parse(argc, argv, 2, {"fixture", "p2p-fixture", "recording", "format"},
                                            {"measure-bandwidth"});
  if (!flags) {
    std::cerr << "podshaper-agent probe: " << flags.error().message << "\n";
    return 2;
  }
  auto backend = podshaper::agent::backendFromFlags(*flags, flags->has("measure-bandwidth"));
  if (!backend) {
    std::cerr << "podshaper-agent probe: " << backend.error().message << "\n";
    return 2;
  }
  std::string format = flags->get("format", "json");
  if (format != "json" && format != "table") {
    std::cerr << "podshaper-agent probe: --format must be json or table\n";
    return 2;
  }
  auto topology = (*backend)->probe();
  if (!topology) {
    std::cerr << "podshaper-agent probe: " << topology.error().message << "\n";
    return 1;
  }
  if (format == "json") {
    std::cout << podshaper::toJson(*topology).dump(2) << "\n";
  } else {
    std::cout << podshaper::renderTopologyTable(*topology);
  }
  return 0;
}

int record(int argc, char** argv) {
  auto flags = podshaper::cli::Flags::parse(argc, argv, 2, {"output"});
  if (!flags) {
    std::cerr << "podshaper-agent record: " << flags.error().message << "\n";
    return 2;
  }
  std::string text = podshaper::agent::recordGpus(podshaper::agent::nodeGpuSources()).dump(1) + "\n";
  if (auto path = flags->get("output")) {
    std::ofstream out(*path);
    if (!(out << text) || !out.flush()) {
      std::cerr << "podshaper-agent record: cannot write " << *path << "\n";
      return 1;
    }
  } else {
    std::cout << text;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // stdout carries the report; logs go to stderr.
  auto log = podshaper::cli::takeLogFlags(argc, argv);
  if (!log) {
    std::cerr << "podshaper-agent: " << log.error().message << "\n";
    return 2;
  }
  podshaper::cli::setUpLogging("podshaper-agent", *log);
  std::string command = argc > 1 ? argv[1] : "";
  if (command != "help" && podshaper::cli::asksHelp(argc, argv)) {
    std::cout << kUsage;
    return 0;
  }
  if (command == "probe") return probe(argc, argv);
  if (command == "record") return record(argc, argv);
  if (command == "run") return podshaper::agent::runReporter(argc, argv);
  if (command == "memlock-probe") return podshaper::agent::runMemlockProbe(argc, argv);
  if (command == "help" || command == "--help" || command == "-h") {
    std::cout << kUsage;
    return 0;
  }
  std::cerr << "podshaper-agent: " << (command.empty() ? "a command is needed" : "unknown command \"" + command + "\"")
            << "\n" << kUsage;
  return 2;
}
