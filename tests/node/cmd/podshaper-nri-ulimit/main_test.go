package main

import (
	"context"
	"flag"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"

	"podshaper.io/tests/node/internal/syncbuf"
)

// The tests launch this test binary as the plugin (from an NRI plugin_path, the
// way containerd does, or by hand with -socket): then it runs main() instead.
const runMainEnv = "PODSHAPER_NRI_ULIMIT_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(api.PluginSocketEnvVar) != "" || os.Getenv(runMainEnv) != "" {
		main()
		os.Exit(0)
	}
	flag.Parse()
	out := io.Discard
	if testing.Verbose() {
		out = os.Stderr
	}
	nrilog.Set(nriLogger{log.New(out, "nri-runtime: ", log.Lmicroseconds)})
	os.Exit(m.Run())
}

const (
	infinity = uint64(18446744073709551615)
	current  = "ulimits.noderesource.dev/container.trainer"
	old      = "ulimits.nri.containerd.io/container.trainer"
)

func TestParseUlimits(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        []ulimit
		wantErr     string // substring; the key is checked to be named too
	}{
		{
			name:        "unlimited memlock",
			annotations: map[string]string{current: "- type: memlock\n  soft: 18446744073709551615\n  hard: 18446744073709551615\n"},
			want:        []ulimit{{Type: "RLIMIT_MEMLOCK", Soft: infinity, Hard: infinity}},
		},
		{
			name:        "4 MiB memlock, flow style, RLIMIT_ prefix",
			annotations: map[string]string{current: `[{"type": "RLIMIT_MEMLOCK", "soft": 4194304, "hard": 4194304}]`},
			want:        []ulimit{{Type: "RLIMIT_MEMLOCK", Soft: 4 << 20, Hard: 4 << 20}},
		},
		{
			name:        "several types, mixed case",
			annotations: map[string]string{current: "- {type: NoFile, soft: 1024, hard: 4096}\n- {type: rlimit_nproc, soft: 10, hard: 20}\n- {type: Rlimit_Stack, soft: 8388608, hard: 18446744073709551615}\n"},
			want: []ulimit{
				{Type: "RLIMIT_NOFILE", Soft: 1024, Hard: 4096},
				{Type: "RLIMIT_NPROC", Soft: 10, Hard: 20},
				{Type: "RLIMIT_STACK", Soft: 8 << 20, Hard: infinity},
			},
		},
		{
			name:        "-1 is an error",
			annotations: map[string]string{current: "- {type: memlock, soft: -1, hard: -1}"},
			wantErr:     "invalid ulimits",
		},
		{
			name:        "soft above hard is an error",
			annotations: map[string]string{current: "- {type: memlock, soft: 8388608, hard: 4194304}"},
			wantErr:     "soft limit 8388608 is above hard limit 4194304",
		},
		{
			name:        "unknown type is an error",
			annotations: map[string]string{current: "- {type: RLIMIT_GPU, soft: 1, hard: 1}"},
			wantErr:     `unknown ulimit type "RLIMIT_GPU"`,
		},
		{
			name:        "missing type is an error",
			annotations: map[string]string{current: "- {soft: 1, hard: 1}"},
			wantErr:     `unknown ulimit type ""`,
		},
		{
			name:        "same type twice is an error",
			annotations: map[string]string{current: "- {type: memlock, soft: 1, hard: 1}\n- {type: RLIMIT_MEMLOCK, soft: 2, hard: 2}"},
			wantErr:     "RLIMIT_MEMLOCK given twice",
		},
		{
			name:        "not a list is an error",
			annotations: map[string]string{current: "type: memlock"},
			wantErr:     "invalid ulimits",
		},
		{
			name:        "deprecated key",
			annotations: map[string]string{old: "- {type: memlock, soft: 65536, hard: 65536}"},
			want:        []ulimit{{Type: "RLIMIT_MEMLOCK", Soft: 65536, Hard: 65536}},
		},
		{
			name: "current key wins",
			annotations: map[string]string{
				old:     "- {type: memlock, soft: 65536, hard: 65536}",
				current: "- {type: memlock, soft: 18446744073709551615, hard: 18446744073709551615}",
			},
			want: []ulimit{{Type: "RLIMIT_MEMLOCK", Soft: infinity, Hard: infinity}},
		},
		{
			name: "current key wins even when the deprecated one is invalid",
			annotations: map[string]string{
				old:     "- {type: memlock, soft: -1, hard: -1}",
				current: "- {type: nofile, soft: 1, hard: 2}",
			},
			want: []ulimit{{Type: "RLIMIT_NOFILE", Soft: 1, Hard: 2}},
		},
		{
			name:        "no annotation, no adjustment",
			annotations: map[string]string{"other": "x"},
		},
		{
			name:        "another container's annotation is ignored",
			annotations: map[string]string{"ulimits.noderesource.dev/container.sidecar": "- {type: memlock, soft: 1, hard: 1}"},
		},
		{
			name:        "empty annotation, no adjustment",
			annotations: map[string]string{current: "  "},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, key, err := parseUlimits("trainer", tc.annotations)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("got %+v, want an error containing %q", got, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), key) || key == "" {
					t.Fatalf("error %q: want it to contain %q and the annotation %q", err, tc.wantErr, key)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestAdjustment(t *testing.T) {
	pod := &api.PodSandbox{Name: "p", Namespace: "ns", Annotations: map[string]string{
		current: "- {type: memlock, soft: 4194304, hard: 18446744073709551615}\n- {type: nofile, soft: 1024, hard: 4096}",
	}}
	adj, _, err := adjustment(pod, &api.Container{Name: "trainer"})
	if err != nil {
		t.Fatal(err)
	}
	want := []*api.POSIXRlimit{
		{Type: "RLIMIT_MEMLOCK", Soft: 4 << 20, Hard: infinity},
		{Type: "RLIMIT_NOFILE", Soft: 1024, Hard: 4096},
	}
	if len(adj.GetRlimits()) != len(want) {
		t.Fatalf("rlimits %v, want %v", adj.GetRlimits(), want)
	}
	for i, r := range adj.GetRlimits() {
		if r.Type != want[i].Type || r.Soft != want[i].Soft || r.Hard != want[i].Hard {
			t.Errorf("rlimit %d: got %v, want %v", i, r, want[i])
		}
	}
	if adj, _, err := adjustment(pod, &api.Container{Name: "other"}); adj != nil || err != nil {
		t.Errorf("container without annotation: got %v, %v; want no adjustment", adj, err)
	}
}

// startRuntime runs containerd's side of NRI (the adaptation containerd embeds)
// with the given plugin_path and socket.
func startRuntime(t *testing.T, pluginDir, confDir, socket string) *adaptation.Adaptation {
	t.Helper()
	sync := func(ctx context.Context, cb adaptation.SyncCB) error {
		_, err := cb(ctx, nil, nil)
		return err
	}
	update := func(context.Context, []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		return nil, nil
	}
	r, err := adaptation.New("containerd", "v2.4.2", sync, update,
		adaptation.WithPluginPath(pluginDir), adaptation.WithPluginConfigPath(confDir),
		adaptation.WithSocketPath(socket))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

func createContainer(r *adaptation.Adaptation, annotations map[string]string) (*api.ContainerAdjustment, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	rpl, err := r.CreateContainer(ctx, &adaptation.CreateContainerRequest{
		Pod:       &api.PodSandbox{Id: "pod-id", Name: "p", Namespace: "ns", Annotations: annotations},
		Container: &api.Container{Id: "ctr-id", PodSandboxId: "pod-id", Name: "trainer"},
	})
	return rpl.GetAdjust(), err
}

func checkPlugin(t *testing.T, r *adaptation.Adaptation) {
	t.Helper()
	adj, err := createContainer(r, map[string]string{current: "- {type: memlock, soft: 18446744073709551615, hard: 18446744073709551615}"})
	if err != nil {
		t.Fatal(err)
	}
	if rl := adj.GetRlimits(); len(rl) != 1 || rl[0].Type != "RLIMIT_MEMLOCK" || rl[0].Soft != infinity || rl[0].Hard != infinity {
		t.Fatalf("rlimits %v, want RLIMIT_MEMLOCK unlimited", rl)
	}
	_, err = createContainer(r, map[string]string{current: "- {type: memlock, soft: -1, hard: -1}"})
	if err == nil || !strings.Contains(err.Error(), current) {
		t.Fatalf("invalid annotation: error %v, want one naming %s", err, current)
	}
}

// TestLaunchedFromPluginPath: containerd launches NN-name executables in its
// plugin_path (here a symlink, as scripts/node.sh installs it).
func TestLaunchedFromPluginPath(t *testing.T) {
	pluginDir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(pluginDir, "10-podshaper-ulimit")); err != nil {
		t.Fatal(err)
	}
	// The plugin's configuration, from containerd's plugin_config_path: a log file,
	// since containerd discards a launched plugin's stderr.
	confDir, logFile := t.TempDir(), filepath.Join(t.TempDir(), "plugin.log")
	if err := os.WriteFile(filepath.Join(confDir, "10-podshaper-ulimit.conf"), []byte("logFile: "+logFile+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startRuntime(t, pluginDir, confDir, filepath.Join(t.TempDir(), "nri.sock"))
	checkPlugin(t, r)
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"configured by containerd v2.4.2", "ns/p container trainer: RLIMIT_MEMLOCK soft=18446744073709551615", current} {
		if !strings.Contains(string(b), want) {
			t.Errorf("plugin log lacks %q:\n%s", want, b)
		}
	}
}

// TestStartedByHand: the plugin connects to the NRI socket itself (-socket), with
// the default index and name since its binary name is not NN-name.
func TestStartedByHand(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "nri.sock")
	r := startRuntime(t, t.TempDir(), t.TempDir(), socket)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncbuf.Buffer
	cmd := exec.Command(self, "-socket", socket)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	// Registration is asynchronous: wait until the plugin adjusts.
	deadline := time.Now().Add(5 * time.Second)
	for {
		adj, err := createContainer(r, map[string]string{current: "- {type: nofile, soft: 1, hard: 2}"})
		if err == nil && len(adj.GetRlimits()) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin did not register in 5 s (last: %v, %v); its stderr:\n%s", adj, err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkPlugin(t, r)
	if !strings.Contains(stderr.String(), "10-"+defaultName) {
		t.Errorf("want the plugin registered as 10-%s; its stderr:\n%s", defaultName, stderr.String())
	}
}
