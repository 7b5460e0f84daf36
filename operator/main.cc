// podshaper-operator: judges GPUTopologyReports against TopologyPolicies.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <string>

#include "operator/run.h"

namespace {

constexpr const char* kUsage = R"(usage:
  podshaper-operator run [--kubeconfig FILE | --in-cluster] [--config FILE] [--listen HOST:PORT] [--identity NAME]
  podshaper-operator version
)";

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("podshaper-operator"));
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "run") return podshaper::op::runOperator(argc, argv);
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
