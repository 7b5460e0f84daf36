#pragma once

namespace podshaper::op {

// podshaper-operator run [--kubeconfig FILE | --in-cluster] [--config FILE] [--listen HOST:PORT] [--identity NAME]
int runOperator(int argc, char** argv);

}  // namespace podshaper::op
