#pragma once

namespace podshaper::agent {

// `podshaper-agent run --node NAME [--fixture FILE [--p2p-fixture FILE]] [--kubeconfig FILE]
//  [--interval SECONDS] [--heartbeat SECONDS] [--once]`
int runReporter(int argc, char** argv);

}  // namespace podshaper::agent
