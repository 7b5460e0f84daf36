#pragma once

// podshaper-operator prune: removes podshaper's labels, taint and GPUTopologyValidated
// condition from every Node, as `helm uninstall` runs it (the chart's pre-delete hook).
// With --stop NAME it first
// deletes the operator's Deployment NAME in --namespace and waits until its pods are gone,
// so that no operator puts a label back. Exits 0 when every Node is clean, 1 when one
// could not be cleaned, 2 on bad flags.

namespace podshaper::op {

int runPrune(int argc, char** argv);

}  // namespace podshaper::op
