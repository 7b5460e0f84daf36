// Command podshaper-shm runs on every node where shaped pods run (docs/shm.md): an NRI
// plugin of the node's containerd that measures each shaped pod's /dev/shm, warns before
// it fills, keeps each run's peak in a ShmUsage object, and removes what a dead run left
// before its container starts again.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/nri/pkg/stub"

	"podshaper.io/shm/host"
	"podshaper.io/shm/kube"
	"podshaper.io/shm/watch"
)

type flags struct {
	node, kubeletRoot, nriSocket, procRoot, metricsAddress, logFormat string
	server, tokenFile, caFile                                         string
	interval, writeEvery                                              time.Duration
	clean, cleanUserVolumes, holdMemlock                              bool
}

func parseFlags(args []string) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("podshaper-shm", flag.ContinueOnError)
	fs.StringVar(&f.node, "node", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	fs.StringVar(&f.kubeletRoot, "kubelet-root", "/var/lib/kubelet", "the kubelet's --root-dir, as mounted here")
	fs.StringVar(&f.nriSocket, "nri-socket", "/var/run/nri/nri.sock", "containerd's NRI socket")
	fs.StringVar(&f.procRoot, "proc", "/proc", "the host's /proc (the pod runs with hostPID)")
	fs.StringVar(&f.metricsAddress, "metrics-address", ":8080", "where /metrics, /healthz and /readyz are served (HTTP)")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fs.StringVar(&f.server, "server", "", "the API server's URL (default: in-cluster)")
	fs.StringVar(&f.tokenFile, "token-file", "", "a bearer token file, with --server")
	fs.StringVar(&f.caFile, "ca-file", "", "the API server's CA, with --server")
	fs.DurationVar(&f.interval, "interval", time.Second, "how often each volume is sampled (statfs)")
	fs.DurationVar(&f.writeEvery, "write-every", 30*time.Second, "at most one routine ShmUsage write per this, on this node")
	fs.BoolVar(&f.clean, "clean", true, "remove a dead run's files from podshaper's /dev/shm before its container restarts")
	fs.BoolVar(&f.cleanUserVolumes, "clean-user-volumes", false, "... and from a pod's own emptyDir at /dev/shm")
	fs.BoolVar(&f.holdMemlock, "hold-memlock", true, "hold back a shaped container whose RLIMIT_MEMLOCK the node did not set as its annotation asks (off: only the Event)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	switch {
	case f.node == "":
		return f, errors.New("--node (or $NODE_NAME) is required")
	case f.interval < 100*time.Millisecond:
		return f, fmt.Errorf("--interval %s is below 100ms", f.interval)
	case f.writeEvery < time.Second:
		return f, fmt.Errorf("--write-every %s is below 1s", f.writeEvery)
	case f.logFormat != "text" && f.logFormat != "json":
		return f, fmt.Errorf("--log-format %q: text or json", f.logFormat)
	case fs.NArg() > 0:
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return f, nil
}

func logger(format string) *slog.Logger {
	opts := &slog.HandlerOptions{}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)).With("logger", "podshaper-shm")
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

func main() {
	f, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "podshaper-shm:", err)
		os.Exit(2)
	}
	log := logger(f.logFormat)
	if err := run(f, log); err != nil {
		log.Error("exiting", "error", err)
		os.Exit(1)
	}
}

func run(f flags, log *slog.Logger) error {
	client, err := kube.New(kube.Config{Server: f.server, TokenFile: f.tokenFile, CAFile: f.caFile,
		Node: f.node, UserAgent: "podshaper-shm/" + f.node})
	if err != nil {
		return err
	}
	runtimeMemlock, err := host.OwnMemlock()
	if err != nil {
		return fmt.Errorf("reading the runtime's default memlock: %w", err)
	}
	writer := watch.NewWriter(client, f.writeEvery, log, time.Now)
	w := watch.New(watch.Config{Node: f.node, KubeletRoot: f.kubeletRoot, ProcRoot: f.procRoot,
		Clean: f.clean, CleanUserVolumes: f.cleanUserVolumes, HoldMemlock: f.holdMemlock, RuntimeMemlock: runtimeMemlock},
		host.Node(f.procRoot), client, writer, log, time.Now)

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	stop := ctx.Done()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); writer.Run(stop, time.Second) }()

	synced := make(chan struct{})
	var syncOnce sync.Once
	srv := &http.Server{Addr: f.metricsAddress, Handler: handler(w, writer, synced), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serving metrics failed", "error", err)
			cancel()
		}
	}()
	go connect(ctx, f, w, log, func() { syncOnce.Do(func() { close(synced) }) })

	t := time.NewTicker(f.interval)
	defer t.Stop()
	log.Info("started", "node", f.node, "nriSocket", f.nriSocket, "interval", f.interval.String(), "clean", f.clean,
		"holdMemlock", f.holdMemlock, "runtimeMemlock", runtimeMemlock.Words())
	for {
		select {
		case <-stop:
			_ = srv.Close()
			wg.Wait()
			log.Info("stopped")
			return nil
		case <-t.C:
			w.Tick()
		}
	}
}

// runtimeNRIVersion is the runtime's NRI version as the stub knows it (a test's seam).
var runtimeNRIVersion = func(s stub.Stub) string { return s.RuntimeNRIVersion() }

// connect keeps podshaper-shm registered with containerd's NRI: again whenever the
// connection closes (containerd restarted), every 2 s until it can. With --hold-memlock
// it registers as a validator too, unless the runtime's NRI asks no validators: then it
// connects again at once without (and tries again as a validator after the next restart).
func connect(ctx context.Context, f flags, w *watch.Watch, log *slog.Logger, synced func()) {
	noValidator := false
	for ctx.Err() == nil {
		base := &plugin{w: w, synced: synced}
		var p any = base
		var v *validator
		if f.holdMemlock && !noValidator {
			v = &validator{plugin: base}
			p = v
		}
		noValidator = false
		s, err := stub.New(p, stub.WithPluginName("podshaper-shm"), stub.WithPluginIdx("90"),
			stub.WithSocketPath(f.nriSocket))
		if err == nil {
			if v != nil {
				v.runtimeNRI = func() string { return runtimeNRIVersion(s) }
			}
			log.Info("connecting to NRI", "socket", f.nriSocket, "validator", v != nil)
			err = s.Run(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		if v != nil && v.tooOld != "" {
			log.Warn("no hold: shaped containers whose memlock the node did not apply are told once started, not held back",
				"why", v.tooOld)
			noValidator = true
			continue
		}
		log.Warn("NRI connection ended; connecting again in 2s", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

func handler(w *watch.Watch, writer *watch.Writer, synced <-chan struct{}) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { fmt.Fprintln(rw, "ok") })
	mux.HandleFunc("/readyz", func(rw http.ResponseWriter, _ *http.Request) {
		select {
		case <-synced:
			fmt.Fprintln(rw, "ok")
		default:
			http.Error(rw, "not yet synchronized with the container runtime (NRI)", http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/metrics", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = rw.Write([]byte(metrics(w.Gauges(), &writer.Writes)))
	})
	return mux
}

// metrics is the Prometheus text of every watched pod's /dev/shm and of the API writes.
func metrics(gauges []watch.Gauge, writes *watch.Counts) string {
	var b strings.Builder
	family := func(name, help string, value func(watch.Gauge) int64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
		for _, g := range gauges {
			fmt.Fprintf(&b, "%s{namespace=%q,pod=%q} %d\n", name, g.Namespace, g.Pod, value(g))
		}
	}
	family("podshaper_pod_shm_size_bytes", "The size of a shaped pod's /dev/shm.", func(g watch.Gauge) int64 { return g.Size })
	family("podshaper_pod_shm_used_bytes", "What a shaped pod's /dev/shm holds (the last sample).", func(g watch.Gauge) int64 { return g.Used })
	family("podshaper_pod_shm_peak_bytes", "The peak of a shaped pod's /dev/shm in its current or last run.", func(g watch.Gauge) int64 { return g.Peak })
	events, usages, failed := writes.Get()
	b.WriteString("# HELP podshaper_shm_api_writes_total API writes podshaper-shm made, by kind (failed ones apart).\n")
	b.WriteString("# TYPE podshaper_shm_api_writes_total counter\n")
	fmt.Fprintf(&b, "podshaper_shm_api_writes_total{kind=\"event\"} %d\n", events)
	fmt.Fprintf(&b, "podshaper_shm_api_writes_total{kind=\"shmusage\"} %d\n", usages)
	fmt.Fprintf(&b, "podshaper_shm_api_writes_total{kind=\"failed\"} %d\n", failed)
	return b.String()
}
