#pragma once

namespace podshaper::webhook {

// `podshaper-webhook serve --listen HOST:PORT --tls-cert FILE --tls-key FILE
//  [--config FILE] [--kubeconfig FILE | --in-cluster] [--threads N]`
int runServe(int argc, char** argv);

}  // namespace podshaper::webhook
