// podshaper-operator: judges GPUTopologyReports against TopologyPolicies.
#include <iostream>
#include <string>

#include "cli/flags.h"
#include "cli/logging.h"
#include "operator/prune.h"
#include "operator/run.h"

namespace {

constexpr const char* kUsage = R"(usage:
  podshaper-operator run [--kubeconfig FILE | --in-cluster] [--config FILE] [--listen HOST:PORT] [--identity NAME]
  podshaper-operator prune [--kubeconfig FILE | --in-cluster] [--namespace NS --stop DEPLOYMENT]
  podshaper-operator version

prune removes podshaper's labels, taint and GPUTopologyValidated condition from every
node (the chart runs it on `helm uninstall`); --stop first deletes the operator's
Deployment and waits for its pods.

Every command also takes --log-level trace|debug|info|warn|error (info) and
--log-format text|json (text; json: one object a line, the time in UTC).
)";

}  // namespace

int main(int argc, char** argv) {
  auto log = podshaper::cli::takeLogFlags(argc, argv);
  if (!log) {
    std::cerr << "podshaper-operator: " << log.error().message << "\n";
    return 2;
  }
  podshaper::cli::setUpLogging("podshaper-operator", *log);
  const std::string command = argc > 1 ? argv[1] : "";
  if (command != "help" && podshaper::cli::asksHelp(argc, argv)) {
    std::cout << kUsage;
    return 0;
  }
  if (command == "run") return podshaper::op::runOperator(argc, argv);
  if (command == "prune") return podshaper::op::runPrune(argc, argv);
  if (command == "version") {
    std::cout << "podshaper-operator " << PODSHAPER_VERSION << "\n";
    return 0;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    std::cout << kUsage;
    return 0;
  }
  std::cerr << "podshaper-operator: " << (command.empty() ? "a command is needed" : "unknown command \"" + command + "\"")
            << "\n" << kUsage;
  return 2;
}
