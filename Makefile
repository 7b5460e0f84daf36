# podshaper: the commands a person types. Everything builds in build/.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build controlplane controlplane-oldest node test test-sanitize fuzz demo review-demo cluster-up cluster-down clean

all: build

deps:
	@bash scripts/deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS)

# etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubelet and kubectl from
# the Go module proxy at the pinned release (tests/controlplane/go.mod).
controlplane:
	@bash scripts/controlplane-build.sh

# The oldest supported release (tests/controlplane-v1.35), for the end-to-end run against it.
controlplane-oldest:
	@PODSHAPER_CONTROLPLANE_MODULE=$(CURDIR)/tests/controlplane-v1.35 \
	  PODSHAPER_CONTROLPLANE_BIN=$(CURDIR)/build/controlplane-v1.35 bash scripts/controlplane-build.sh

# The real test node's parts: containerd, the NRI ulimit and test device plugins
# (scripts/node-build.sh), and its images (scripts/node-images.sh); kubelet comes with
# the control plane. Cached in ~/.cache/podshaper/.
node: deps controlplane
	@bash scripts/node-build.sh
	@bash scripts/node-images.sh >/dev/null

# Unit, golden and CLI tests, then the end-to-end tests against a real control plane
# and a real node. A cluster of this checkout left running (make demo's, make cluster-up's,
# a killed test's) is stopped first, with a line saying so: the tests start real nodes of
# their own, and a machine runs one at a time. The oldest release's tests, last, get its
# control plane themselves (built, cached or waited for: tests/e2e/CMakeLists.txt).
test: build controlplane node
	@PODSHAPER_BUILD_DIR=$(BUILD_DIR) bash scripts/cluster.sh down-all
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# The unit, golden, CLI, fuzz-replay and hardening tests again, built with AddressSanitizer
# (LeakSanitizer included) and UndefinedBehaviorSanitizer: any report fails the test.
# The end-to-end tests are left to `make test` (their binaries are the same code).
test-sanitize: deps
	@bash scripts/test-sanitize.sh

# Every libFuzzer target (fuzz/README.md) for FUZZ_SECONDS each, built with clang.
FUZZ_SECONDS ?= 20
fuzz:
	@bash scripts/fuzz.sh --seconds $(FUZZ_SECONDS)

# The control plane and the real node, podshaper installed there as pods (kubectl apply -k).
cluster-up: build controlplane node
	@PODSHAPER_WITH_NODE=yes PODSHAPER_WITH_WEBHOOK=no PODSHAPER_WITH_CRDS=no bash scripts/cluster.sh up
	@bash scripts/cluster.sh install

cluster-down:
	@bash scripts/cluster.sh down

# The README's first command: a control plane and a real node, podshaper installed on it as
# an admin installs it (images, kubectl apply -k), a training job, explained.
demo: build controlplane node
	@bash scripts/demo.sh

# The offline dry run alone, no cluster.
review-demo: build
	@bash scripts/review-demo.sh

# The container images podshaper-{webhook,operator,agent}:0.1.0, with the local Docker
# engine (images/Dockerfile; base image debootstrapped and cached in ~/.cache/podshaper).
.PHONY: images
images:
	@bash scripts/images.sh

# Benchmarks against the peer (not part of test): one table, docs/BENCHMARKS.md explains it.
.PHONY: bench
bench: controlplane
	@bash scripts/deps.sh --bench
	@cmake -S . -B $(BUILD_DIR) >/dev/null   # finds Google Benchmark, now installed
	@$(MAKE) --no-print-directory build
	@bash scripts/bench/run.sh

clean:
	-@PODSHAPER_BUILD_DIR=$(BUILD_DIR) bash scripts/cluster.sh down-all
	rm -rf $(BUILD_DIR) .cluster
