#pragma once

namespace podshaper::webhook {

// `podshaper-webhook review -f FILE|- [-n NAMESPACE] [--config FILE] [--cluster FILE] [--output yaml|json]`:
// Pods and workloads (YAML or JSON) in, each shaped as its pods would be; exit 1 on a denial.
// `podshaper-webhook review [--config FILE] [--cluster FILE] [--output review|pod] < admissionreview.json`:
// the AdmissionReview form. --cluster: `kubectl get namespaces,nodes -o json`, to decide as
// serve would on that cluster.
int runReview(int argc, char** argv);

}  // namespace podshaper::webhook
