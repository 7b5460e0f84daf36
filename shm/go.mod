// podshaper-shm: the node component that measures each shaped pod's /dev/shm and clears
// what a dead run left there before the next run starts (docs/shm.md). Go, because
// containerd's NRI SDK is Go (docs/design.md).
module podshaper.io/shm

go 1.24.0

require (
	github.com/containerd/nri v0.12.3
	go.yaml.in/yaml/v3 v3.0.5
	golang.org/x/mod v0.32.0
)

require (
	github.com/containerd/log v0.1.0 // indirect
	github.com/containerd/ttrpc v1.2.7 // indirect
	github.com/knqyf263/go-plugin v0.9.0 // indirect
	github.com/opencontainers/runtime-spec v1.3.0 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	github.com/tetratelabs/wazero v1.11.0 // indirect
	golang.org/x/sys v0.39.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20240528184218-531527333157 // indirect
	google.golang.org/grpc v1.65.1 // indirect
	google.golang.org/protobuf v1.34.1 // indirect
)
