// podshaper-webhook: the mutating admission webhook that shapes GPU training pods.
#include <iostream>
#include <string>

#include "webhook/config_file.h"
#include "webhook/review.h"
#include "webhook/serve.h"

namespace {

constexpr const char* kUsage = R"(usage:
  podshaper-webhook serve --listen HOST:PORT --tls-cert FILE --tls-key FILE [--config FILE] [--kubeconfig FILE]
  podshaper-webhook review [--config FILE] [--cluster FILE] [--output review|pod] < admissionreview.json
  podshaper-webhook version
)";

}  // namespace

int main(int argc, char** argv) {
  std::string command = argc > 1 ? argv[1] : "";
  if (command == "serve") return podshaper::webhook::runServe(argc, argv);
  if (command == "review") return podshaper::webhook::runReview(argc, argv);
  if (command == "version") {
    std::cout << podshaper::webhook::kShaperVersion << "\n";
    return 0;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    std::cout << kUsage;
    return 0;
  }
  std::cerr << (command.empty() ? "podshaper-webhook: a command is needed\n"
                                : "podshaper-webhook: unknown command \"" + command + "\"\n")
            << kUsage;
  return 2;
}
