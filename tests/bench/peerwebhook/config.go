package main

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// Config is podshaper's webhook config file (README "Config"): every key optional,
// unknown keys are errors.
type Config struct {
	Defaults Defaults `json:"defaults"`
	Limits   Limits   `json:"limits"`
	// /dev/shm NCCL keeps per rank per communicator, by transport (podshaper's
	// shaping/nccl.h NcclShmCosts).
	NCCLShmPerCommunicator NCCLShmCosts `json:"ncclShmPerCommunicator"`
	PartialNode            string       `json:"partialNode"` // deny | warn | expand
	PodSecurity            string       `json:"podSecurity"` // deny | warn
	// RLIMIT_MEMLOCK asked of the NRI ulimit-adjuster: "unlimited" (absent) or a quantity
	// of bytes ("4Mi"), which the node must grant (node label podshaper.io/memlock).
	Memlock      json.RawMessage `json:"memlock,omitempty"`
	memlockBytes uint64          // Memlock read by validate; 0: unlimited
}

// NCCLShmCosts is what NCCL keeps in /dev/shm for each rank and each communicator, by
// the transport its ranks use: NET (the job spans nodes), P2P (through cuMem: nothing),
// SHM (P2P missing).
type NCCLShmCosts struct {
	NET resource.Quantity `json:"net"`
	P2P resource.Quantity `json:"p2p"`
	SHM resource.Quantity `json:"shm"`
}

type Defaults struct {
	Workers         uint64 `json:"workers"`
	PrefetchFactor  uint64 `json:"prefetchFactor"`
	HeadroomPercent uint64 `json:"headroomPercent"`
	// NCCL communicators (process groups) each rank makes, where the pod does not say
	// (podshaper.io/nccl-communicators).
	NCCLCommunicators uint64 `json:"ncclCommunicators"`
	// Keys podshaper no longer reads: set (to anything, null included), they are errors.
	OldNCCLShmReservePerRankWithP2P json.RawMessage    `json:"ncclShmReservePerRankWithP2P,omitempty"`
	OldNCCLShmReservePerRank        json.RawMessage    `json:"ncclShmReservePerRank,omitempty"`
	GPUsPerNode                     uint64             `json:"gpusPerNode"`
	NodeMemory                      *resource.Quantity `json:"nodeMemory,omitempty"` // nil: the shm cap is not checked
}

type Limits struct {
	MaxShmPercentOfNodeMemory uint64 `json:"maxShmPercentOfNodeMemory"`
}

// DefaultConfig is the config an empty (or absent) file means.
func DefaultConfig() Config {
	return Config{
		Defaults: Defaults{
			Workers:           4,
			PrefetchFactor:    2,
			HeadroomPercent:   20,
			NCCLCommunicators: 4,
			GPUsPerNode:       8,
		},
		Limits: Limits{MaxShmPercentOfNodeMemory: 50},
		// Measured with NCCL 2.28 on x86-64 (docs/webhook.md "The NCCL reserve").
		NCCLShmPerCommunicator: NCCLShmCosts{
			NET: *resource.NewQuantity(34213888, resource.DecimalSI),
			P2P: *resource.NewQuantity(0, resource.DecimalSI),
			SHM: *resource.NewQuantity(72814592, resource.DecimalSI),
		},
		PartialNode: "deny",
		PodSecurity: "deny",
	}
}

// LoadConfig reads the YAML file at path ("" means all defaults).
func LoadConfig(path string) (Config, error) {
	cfg := DefaultConfig()
	if path == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return cfg, fmt.Errorf("%s: config: %w", path, err)
	}
	if err := cfg.validate(); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

func (c *Config) validate() error {
	ranges := []struct {
		key      string
		value    uint64
		min, max uint64
	}{
		{"defaults.workers", c.Defaults.Workers, 0, 1024},
		{"defaults.prefetchFactor", c.Defaults.PrefetchFactor, 1, 1024},
		{"defaults.headroomPercent", c.Defaults.HeadroomPercent, 0, 1000},
		{"defaults.ncclCommunicators", c.Defaults.NCCLCommunicators, 0, 1024},
		{"defaults.gpusPerNode", c.Defaults.GPUsPerNode, 1, 1024},
		{"limits.maxShmPercentOfNodeMemory", c.Limits.MaxShmPercentOfNodeMemory, 1, 100},
	}
	for _, r := range ranges {
		if r.value < r.min || r.value > r.max {
			return fmt.Errorf("config: %s: %d is out of range %d..%d", r.key, r.value, r.min, r.max)
		}
	}
	const replaced = "replaced by defaults.ncclCommunicators and ncclShmPerCommunicator (net, p2p, shm): " +
		"NCCL's /dev/shm is per rank per communicator, by transport (docs/webhook.md)"
	if len(c.Defaults.OldNCCLShmReservePerRankWithP2P) > 0 {
		return fmt.Errorf("config: defaults.ncclShmReservePerRankWithP2P: %s", replaced)
	}
	if len(c.Defaults.OldNCCLShmReservePerRank) > 0 {
		return fmt.Errorf("config: defaults.ncclShmReservePerRank: %s", replaced)
	}
	for _, q := range []struct {
		key   string
		value *resource.Quantity
	}{
		{"ncclShmPerCommunicator.net", &c.NCCLShmPerCommunicator.NET},
		{"ncclShmPerCommunicator.p2p", &c.NCCLShmPerCommunicator.P2P},
		{"ncclShmPerCommunicator.shm", &c.NCCLShmPerCommunicator.SHM},
	} {
		if _, err := quantityBytes(*q.value); err != nil {
			return fmt.Errorf("config: %s: %v", q.key, err)
		}
	}
	if c.Defaults.NodeMemory != nil && c.Defaults.NodeMemory.Sign() < 0 {
		return fmt.Errorf("config: defaults.nodeMemory: %q is negative", c.Defaults.NodeMemory.String())
	}
	if len(c.Memlock) > 0 {
		bytes, err := parseMemlock(c.Memlock)
		if err != nil {
			return fmt.Errorf("config: memlock: %v", err)
		}
		c.memlockBytes = bytes
	}
	switch c.PartialNode {
	case "deny", "warn", "expand":
	default:
		return fmt.Errorf("config: partialNode: %q is not one of deny, warn, expand", c.PartialNode)
	}
	switch c.PodSecurity {
	case "deny", "warn":
	default:
		return fmt.Errorf("config: podSecurity: %q is not one of deny, warn", c.PodSecurity)
	}
	return nil
}

// parseMemlock reads the memlock key as podshaper's parseMemlockLimit: "unlimited" (0),
// or a quantity of at least one byte.
func parseMemlock(raw json.RawMessage) (uint64, error) {
	text := string(raw)
	switch {
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &text); err != nil {
			return 0, err
		}
	case raw[0] == '{' || raw[0] == '[' || text == "null":
		return 0, fmt.Errorf("expected a single value")
	}
	if text == "unlimited" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(text)
	if err == nil {
		_, err = quantityBytes(q)
	}
	if err != nil {
		return 0, fmt.Errorf("%q is neither unlimited nor a quantity of bytes (e.g. 4Mi, 64Gi)", text)
	}
	if q.IsZero() {
		return 0, fmt.Errorf("%q is zero: a locked-memory limit is at least 1 byte", text)
	}
	return uint64(q.Value()), nil
}

// MemlockText is the memlock asked: "unlimited", or the bytes in decimal (the node
// label podshaper.io/memlock's form, and the config hash's).
func (c *Config) MemlockText() string {
	if c.memlockBytes == 0 {
		return "unlimited"
	}
	return strconv.FormatUint(c.memlockBytes, 10)
}

// Hash is a stable hash of the effective settings, shown in podshaper.io/shaped-by.
// It hashes the same canonical text as podshaper's Config::hash (FNV-1a 64), so both
// webhooks name one config alike.
func (c *Config) Hash() string {
	nodeMemory := ""
	if c.Defaults.NodeMemory != nil {
		nodeMemory = strconv.FormatInt(c.Defaults.NodeMemory.Value(), 10)
	}
	costs := &c.NCCLShmPerCommunicator
	canonical := fmt.Sprintf("workers=%d;prefetchFactor=%d;headroomPercent=%d;ncclCommunicators=%d;"+
		"ncclShmPerCommunicator=net:%d,p2p:%d,shm:%d;"+
		"gpusPerNode=%d;nodeMemory=%s;maxShmPercentOfNodeMemory=%d;partialNode=%s;podSecurity=%s;memlock=%s",
		c.Defaults.Workers, c.Defaults.PrefetchFactor, c.Defaults.HeadroomPercent, c.Defaults.NCCLCommunicators,
		costs.NET.Value(), costs.P2P.Value(), costs.SHM.Value(), c.Defaults.GPUsPerNode, nodeMemory,
		c.Limits.MaxShmPercentOfNodeMemory, c.PartialNode, c.PodSecurity, c.MemlockText())
	h := fnv.New64a()
	h.Write([]byte(canonical))
	return fmt.Sprintf("%016x", h.Sum64())
}
