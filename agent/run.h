#pragma once

namespace podshaper::agent {

// `podshaper-agent run --node NAME [--fixture FILE [--p2p-fixture FILE]] [--kubeconfig FILE]
//  [--interval SECONDS] [--heartbeat SECONDS] [--once]
//  [--memlock-probe-file FILE [--memlock-probe-pod NAMESPACE/NAME] [--memlock-requested unlimited|QUANTITY]
//   [--memlock-probe-wait SECONDS]]`
int runReporter(int argc, char** argv);

}  // namespace podshaper::agent
