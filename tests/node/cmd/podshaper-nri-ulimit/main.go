// Command podshaper-nri-ulimit is test infrastructure, not part of podshaper: an NRI
// plugin for containerd with the same contract as containerd's upstream
// ulimit-adjuster (github.com/containerd/nri/plugins/ulimit-adjuster), which the
// module proxy does not serve as a Go module. It stands in for the ulimit-adjuster a
// user deploys, so the end-to-end tests on a real node can check that a pod shaped
// by podshaper-webhook gets the RLIMIT_MEMLOCK its ulimit annotation asks for.
//
// On CreateContainer it reads the pod annotation
// ulimits.noderesource.dev/container.<container name> (or the deprecated
// ulimits.nri.containerd.io/container.<container name>; the current key wins), a
// YAML list of {type, soft, hard}, and adjusts the container's rlimits. An invalid
// annotation fails the container's creation with an error naming the annotation.
//
// containerd can launch it from its NRI plugin_path (the file must be named
// NN-name, e.g. 10-podshaper-ulimit: containerd passes name and index in
// NRI_PLUGIN_NAME / NRI_PLUGIN_IDX and the connection in NRI_PLUGIN_SOCKET, and
// discards its stdout and stderr; an optional plugin configuration
// <plugin_config_path>/10-podshaper-ulimit.conf with `logFile: PATH` sends the log
// there too), or it can be started by hand against containerd's NRI socket
// (-socket, -idx, -name, -log-file; it logs to stderr).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/containerd/ttrpc"
	"sigs.k8s.io/yaml"
)

const (
	// ulimitKey is the annotation prefix the upstream ulimit-adjuster reads.
	ulimitKey = "ulimits.noderesource.dev"
	// oldUlimitKey is its deprecated predecessor, still accepted.
	oldUlimitKey = "ulimits.nri.containerd.io"
	rlimitPrefix = "RLIMIT_"

	// defaultIdx and defaultName are used when neither containerd (environment),
	// the flags nor the binary's name (NN-name) give the plugin an identity.
	defaultIdx  = "10"
	defaultName = "podshaper-ulimit"
)

// validTypes are the resource names (without RLIMIT_) upstream accepts, the Linux
// resource limits of setrlimit(2).
var validTypes = map[string]bool{
	"AS": true, "CORE": true, "CPU": true, "DATA": true, "FSIZE": true, "LOCKS": true,
	"MEMLOCK": true, "MSGQUEUE": true, "NICE": true, "NOFILE": true, "NPROC": true,
	"RSS": true, "RTPRIO": true, "RTTIME": true, "SIGPENDING": true, "STACK": true,
}

// ulimit is one entry of the annotation. soft and hard are unsigned 64-bit, so
// 18446744073709551615 is RLIM_INFINITY and a negative number is an error.
type ulimit struct {
	Type string `json:"type"`
	Soft uint64 `json:"soft"`
	Hard uint64 `json:"hard"`
}

// annotationKeys returns the keys read for a container, current one first.
func annotationKeys(container string) []string {
	return []string{
		ulimitKey + "/container." + container,
		oldUlimitKey + "/container." + container,
	}
}

// parseUlimits returns the container's ulimits from the pod's annotations (types
// normalized to RLIMIT_*), the key they came from, or an error naming that key. No
// annotation (or an empty one) gives no ulimits and no error.
func parseUlimits(container string, annotations map[string]string) ([]ulimit, string, error) {
	var key, val string
	for _, k := range annotationKeys(container) {
		if v, ok := annotations[k]; ok {
			key, val = k, v
			break
		}
	}
	if strings.TrimSpace(val) == "" {
		return nil, key, nil
	}
	var ulimits []ulimit
	if err := yaml.Unmarshal([]byte(val), &ulimits); err != nil {
		return nil, key, fmt.Errorf("annotation %s: invalid ulimits: %w", key, err)
	}
	seen := map[string]bool{}
	for i, u := range ulimits {
		typ := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(u.Type)), rlimitPrefix)
		if !validTypes[typ] {
			return nil, key, fmt.Errorf("annotation %s: entry %d: unknown ulimit type %q", key, i, u.Type)
		}
		ulimits[i].Type = rlimitPrefix + typ
		// containerd would refuse the second one as a conflict; say why here.
		if seen[typ] {
			return nil, key, fmt.Errorf("annotation %s: ulimit %s given twice", key, ulimits[i].Type)
		}
		seen[typ] = true
		if u.Soft > u.Hard {
			return nil, key, fmt.Errorf("annotation %s: ulimit %s: soft limit %d is above hard limit %d",
				key, ulimits[i].Type, u.Soft, u.Hard)
		}
	}
	return ulimits, key, nil
}

// adjustment turns the container's annotation into an NRI adjustment: nil when the
// pod has no ulimit annotation for it.
func adjustment(pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []ulimit, error) {
	if pod == nil || ctr == nil {
		return nil, nil, nil
	}
	ulimits, _, err := parseUlimits(ctr.GetName(), pod.GetAnnotations())
	if err != nil || len(ulimits) == 0 {
		return nil, nil, err
	}
	adjust := &api.ContainerAdjustment{}
	for _, u := range ulimits {
		adjust.AddRlimit(u.Type, u.Hard, u.Soft)
	}
	return adjust, ulimits, nil
}

type plugin struct {
	logger *log.Logger
	out    io.Writer // where logger writes before Configure
}

// pluginConfig is the optional NRI plugin configuration: containerd reads it from
// <plugin_config_path>/NN-name.conf (or name.conf) and passes it in Configure.
type pluginConfig struct {
	// LogFile, if set, also gets the log lines: containerd discards the stdout and
	// stderr of the plugins it launches from plugin_path.
	LogFile string `json:"logFile"`
}

// Configure implements stub.ConfigureInterface.
func (p *plugin) Configure(_ context.Context, config, runtime, version string) (api.EventMask, error) {
	var cfg pluginConfig
	if strings.TrimSpace(config) != "" {
		if err := yaml.UnmarshalStrict([]byte(config), &cfg); err != nil {
			return 0, fmt.Errorf("invalid plugin configuration: %w", err)
		}
	}
	if cfg.LogFile != "" {
		f, err := os.OpenFile(cfg.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return 0, fmt.Errorf("plugin configuration: %w", err)
		}
		p.logger.SetOutput(io.MultiWriter(p.out, f))
	}
	p.logger.Printf("configured by %s %s", runtime, version)
	return 0, nil
}

// CreateContainer implements stub.CreateContainerInterface.
func (p *plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adjust, ulimits, err := adjustment(pod, ctr)
	where := fmt.Sprintf("%s/%s container %s", pod.GetNamespace(), pod.GetName(), ctr.GetName())
	if err != nil {
		p.logger.Printf("ERROR %s: %v", where, err)
		return nil, nil, err
	}
	for _, u := range ulimits {
		p.logger.Printf("%s: %s soft=%d hard=%d", where, u.Type, u.Soft, u.Hard)
	}
	return adjust, nil, nil
}

// nriLogger routes the stub's log lines to our logger (stderr).
type nriLogger struct{ l *log.Logger }

func (n nriLogger) Debugf(_ context.Context, f string, a ...interface{}) {}
func (n nriLogger) Infof(_ context.Context, f string, a ...interface{}) {
	n.l.Printf("nri: "+f, a...)
}
func (n nriLogger) Warnf(_ context.Context, f string, a ...interface{}) {
	n.l.Printf("WARN nri: "+f, a...)
}
func (n nriLogger) Errorf(_ context.Context, f string, a ...interface{}) {
	n.l.Printf("ERROR nri: "+f, a...)
}

func main() {
	var (
		name    = flag.String("name", "", "plugin name to register with NRI (default: containerd's NRI_PLUGIN_NAME; with -idx the binary's name; else from a binary named NN-name; else "+defaultName+")")
		idx     = flag.String("idx", "", "plugin index, two digits, to register with NRI (default: containerd's NRI_PLUGIN_IDX; else from a binary named NN-name; else "+defaultIdx+")")
		socket  = flag.String("socket", "", "containerd's NRI socket to connect to when started by hand (default "+api.DefaultSocketPath+")")
		logFile = flag.String("log-file", "", "append log lines to this file instead of stderr (containerd discards the output of plugins it launches)")
	)
	flag.Parse()

	var out io.Writer = os.Stderr
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "podshaper-nri-ulimit: %v\n", err)
			os.Exit(1)
		}
		defer f.Close()
		out = f
	}
	logger := log.New(out, "podshaper-nri-ulimit: ", log.LstdFlags|log.Lmicroseconds)

	opts := []stub.Option{stub.WithLogger(nriLogger{logger})}
	if *socket != "" {
		opts = append(opts, stub.WithSocketPath(*socket))
	}
	// Started by hand under a name that is not NN-name, without -idx: the stub
	// would refuse to start, so take the defaults.
	if *idx == "" && os.Getenv(api.PluginIdxEnvVar) == "" {
		if _, _, err := api.ParsePluginName(filepath.Base(os.Args[0])); err != nil {
			*idx = defaultIdx
			if *name == "" {
				*name = defaultName
			}
		}
	}
	if *name != "" {
		opts = append(opts, stub.WithPluginName(*name))
	}
	if *idx != "" {
		opts = append(opts, stub.WithPluginIdx(*idx))
	}

	p := &plugin{logger: logger, out: out}
	s, err := stub.New(p, opts...)
	if err != nil {
		logger.Fatalf("creating the NRI plugin: %v", err)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	err = s.Run(ctx)
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		logger.Printf("stopped")
	case errors.Is(err, ttrpc.ErrServerClosed):
		logger.Printf("containerd closed the connection, exiting")
	default:
		logger.Printf("ERROR plugin exited: %v", err)
		cancel()
		os.Exit(1)
	}
}
