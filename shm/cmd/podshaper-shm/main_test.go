package main

import (
	"strings"
	"testing"
	"time"

	"podshaper.io/shm/watch"
)

func TestFlagsRefuseWhatCannotRun(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--node (or $NODE_NAME) is required"},
		{[]string{"--node", "n", "--interval", "10ms"}, "--interval 10ms is below 100ms"},
		{[]string{"--node", "n", "--write-every", "500ms"}, "--write-every 500ms is below 1s"},
		{[]string{"--node", "n", "--log-format", "xml"}, `--log-format "xml": text or json`},
		{[]string{"--node", "n", "extra"}, `unexpected argument "extra"`},
	} {
		_, err := parseFlags(c.args)
		if err == nil || err.Error() != c.want {
			t.Errorf("parseFlags(%q) = %v, want %q", c.args, err, c.want)
		}
	}
}

func TestFlagsDefaults(t *testing.T) {
	t.Setenv("NODE_NAME", "gpu-7")
	f, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.node != "gpu-7" || f.interval != time.Second || f.writeEvery != 30*time.Second || !f.clean || f.cleanUserVolumes || !f.holdMemlock ||
		f.kubeletRoot != "/var/lib/kubelet" || f.nriSocket != "/var/run/nri/nri.sock" || f.metricsAddress != ":8080" {
		t.Errorf("defaults: %+v", f)
	}
}

func TestMetricsText(t *testing.T) {
	var writes watch.Counts
	got := metrics([]watch.Gauge{{Namespace: "ml", Pod: "train-0", Size: 168820736, Used: 50331648, Peak: 52428800}}, &writes)
	for _, want := range []string{
		"# TYPE podshaper_pod_shm_size_bytes gauge\n",
		`podshaper_pod_shm_size_bytes{namespace="ml",pod="train-0"} 168820736` + "\n",
		`podshaper_pod_shm_used_bytes{namespace="ml",pod="train-0"} 50331648` + "\n",
		`podshaper_pod_shm_peak_bytes{namespace="ml",pod="train-0"} 52428800` + "\n",
		`podshaper_shm_api_writes_total{kind="failed"} 0` + "\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("metrics lack %q:\n%s", want, got)
		}
	}
	// A pod gone: no series of it, the families still declared.
	got = metrics(nil, &writes)
	if strings.Contains(got, "train-0") || !strings.Contains(got, "# TYPE podshaper_pod_shm_used_bytes gauge") {
		t.Errorf("metrics without pods:\n%s", got)
	}
}
