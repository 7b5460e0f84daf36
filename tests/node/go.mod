// Test infrastructure for the real test node (the pinned kubelet, containerd v2.4.2
// with NRI): an NRI ulimit plugin and a fake GPU device plugin. Not part of the
// product; see README.md.
module podshaper.io/tests/node

go 1.24.0

require (
	github.com/containerd/nri v0.12.3
	github.com/containerd/ttrpc v1.2.7
	google.golang.org/grpc v1.65.1
	k8s.io/kubelet v0.32.4
	sigs.k8s.io/yaml v1.4.0
)

require (
	github.com/containerd/log v0.1.0 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/knqyf263/go-plugin v0.9.0 // indirect
	github.com/opencontainers/runtime-spec v1.3.0 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	github.com/tetratelabs/wazero v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/mod v0.32.0 // indirect
	golang.org/x/net v0.30.0 // indirect
	golang.org/x/sys v0.39.0 // indirect
	golang.org/x/text v0.19.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20240826202546-f6391c0de4c7 // indirect
	google.golang.org/protobuf v1.35.1 // indirect
)
