#pragma once

namespace podshaper::webhook {

// `podshaper-webhook review [--config FILE] [--cluster FILE] [--output review|pod] < admissionreview.json`
// --cluster: `kubectl get namespaces,nodes -o json`, to decide as serve would on that cluster.
int runReview(int argc, char** argv);

}  // namespace podshaper::webhook
