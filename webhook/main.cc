// podshaper-webhook: the mutating admission webhook that shapes GPU training pods.
#include <iostream>
#include <string>

#include "cli/flags.h"
#include "cli/logging.h"
#include "webhook/check.h"
#include "webhook/config_file.h"
#include "webhook/review.h"
#include "webhook/serve.h"

namespace {

constexpr const char* kUsage = R"(usage:
  podshaper-webhook serve --listen HOST:PORT --tls-cert FILE --tls-key FILE [--config FILE]
                          [--kubeconfig FILE | --in-cluster] [--threads N]
                          [--read-timeout 10s] [--idle-timeout 60s]
                          [--shutdown-delay 0s] [--drain-timeout 10s]
  podshaper-webhook review -f FILE|DIR|- [-n NAMESPACE] [--config FILE] [--cluster FILE] [-o yaml|json|diff]
  podshaper-webhook review [--config FILE] [--cluster FILE] [-o review|pod] < admissionreview.json
  podshaper-webhook check [--kubeconfig FILE | --in-cluster] [--namespace NS]
  podshaper-webhook version
  podshaper-webhook COMMAND --help

review -f:
  Pods and workloads (Job, CronJob, Deployment, JobSet, PyTorchJob, RayJob, any kind with
  pod templates; a TrainJob through the runtime it names), YAML or JSON, several to a
  file; DIR: every .yaml, .yml and .json in it; -: stdin. Each pod template is shaped as
  the pods made from it would be and printed in the input's format (-o yaml|json), or as
  a unified diff against the input (-o diff); objects podshaper leaves alone are printed
  as read. Warnings, notes and denials go to stderr.
  Nodes, Namespaces, ResourceClaimTemplates, ResourceClaims, ShmProfiles and DeviceClasses
  in the input are read as --cluster reads them (and printed back): the file may hold the
  workload and what it needs. Without any Node, the node size is config
  defaults.gpusPerNode; without --cluster and without a ShmProfile in the input, no
  workload's measured runs are known, and /dev/shm is sized by the formula.
  -n: the namespace of objects that name none (default: "default"). --cluster: the output
  of `kubectl get namespaces,nodes,resourceclaimtemplates,resourceclaims,shmprofiles -A -o json`,
  to decide as serve would on that cluster.
  Exit codes: 0 every pod would be shaped or left alone; 1 one would be denied; 2 the
  input or a flag could not be used.

serve:
  --read-timeout D    a request must arrive whole within D of its first byte (and a
                      response be written within D), or the connection is closed
  --idle-timeout D    how long a kept-alive connection may wait for its next request
  --shutdown-delay D  on SIGTERM: /readyz is 503 at once, and serving goes on for D
                      (every response saying Connection: close) while the endpoint
                      is removed; in Kubernetes use 5s, with a
                      terminationGracePeriodSeconds above D + --drain-timeout
  --drain-timeout D   then: stop listening, finish the requests in flight, close
                      idle connections; connections still open after D are cut
  Durations: 90s, 1m, 1m30s (whole seconds). A second signal ends the delay early.

check:
  Asks the API server to create (dry run) a pod that opts in with one GPU in NS (default:
  "default") and says whether the webhook shaped or denied it: exit 0 when it answered,
  1 when the API server did not call it (what `helm test` runs).

Every command also takes --log-level trace|debug|info|warn|error (info) and
--log-format text|json (text; json: one object a line, the time in UTC).
)";

}  // namespace

int main(int argc, char** argv) {
  auto log = podshaper::cli::takeLogFlags(argc, argv);
  if (!log) {
    std::cerr << "podshaper-webhook: " << log.error().message << "\n";
    return 2;
  }
  podshaper::cli::setUpLogging("podshaper-webhook", *log);
  std::string command = argc > 1 ? argv[1] : "";
  if (command != "help" && podshaper::cli::asksHelp(argc, argv)) {
    std::cout << kUsage;
    return 0;
  }
  if (command == "serve") return podshaper::webhook::runServe(argc, argv);
  if (command == "review") return podshaper::webhook::runReview(argc, argv);
  if (command == "check") return podshaper::webhook::runCheck(argc, argv);
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
