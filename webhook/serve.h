#pragma once

namespace podshaper::webhook {

// `podshaper-webhook serve --listen HOST:PORT --tls-cert FILE --tls-key FILE
//  [--config FILE] [--kubeconfig FILE | --in-cluster] [--threads N]
//  [--read-timeout D] [--idle-timeout D] [--shutdown-delay D] [--drain-timeout D]`
// (main.cc's usage says what each does.) SIGTERM/SIGINT: a graceful shutdown, exit 0.
int runServe(int argc, char** argv);

}  // namespace podshaper::webhook
