package main

import (
	"context"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"podshaper.io/tests/node/internal/syncbuf"
)

func TestParseFixture(t *testing.T) {
	for file, want := range map[string]int{
		"testdata/g6e.12xlarge-4xL40S-pcie-node.topo-m.txt": 4,
		"testdata/p5.48xlarge-8xH100-nv18.topo-m.txt":       8,
	} {
		idx, err := parseFixtureFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if len(idx) != want {
			t.Errorf("%s: %d GPUs %v, want %d", file, len(idx), idx, want)
		}
		for i, n := range idx {
			if n != i {
				t.Errorf("%s: GPU indices %v, want 0..%d", file, idx, want-1)
				break
			}
		}
	}
}

func TestParseFixtureRows(t *testing.T) {
	// Tab-separated (nvidia-smi's own output), NIC rows and legend ignored,
	// duplicated rows counted once.
	in := "\tGPU0\tGPU1\tNIC0\tCPU Affinity\n" +
		"GPU0\t X \tNV4\tPXB\t0-11\n" +
		"GPU1\tNV4\t X \tPXB\t0-11\n" +
		"GPU1\tNV4\t X \tPXB\t0-11\n" +
		"NIC0\tPXB\tPXB\t X \n\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
	idx, err := parseFixture(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(idx, []int{0, 1}) {
		t.Errorf("indices %v, want [0 1]", idx)
	}
	if _, err := parseFixture(strings.NewReader("no GPUs here\nGPUX 1 2\n")); err == nil {
		t.Error("a fixture without GPU rows: want an error")
	}
}

func TestFakeUUID(t *testing.T) {
	shape := regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	a := fakeUUID("node-a", 0)
	if !shape.MatchString(a) {
		t.Errorf("%q is not shaped like an NVIDIA GPU UUID", a)
	}
	if fakeUUID("node-a", 0) != a {
		t.Error("not stable")
	}
	if fakeUUID("node-a", 1) == a || fakeUUID("node-b", 0) == a {
		t.Error("not distinct across indices or nodes")
	}
}

// fakeKubelet serves kubelet's Registration service on dir/kubelet.sock.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	server *grpc.Server
	reqs   chan *pluginapi.RegisterRequest
}

func (k *fakeKubelet) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.reqs <- req
	return &pluginapi.Empty{}, nil
}

func startFakeKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(dir, kubeletSocketName))
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{server: grpc.NewServer(), reqs: make(chan *pluginapi.RegisterRequest, 10)}
	pluginapi.RegisterRegistrationServer(k.server, k)
	go k.server.Serve(l)
	t.Cleanup(k.server.Stop)
	return k
}

func (k *fakeKubelet) waitRegister(t *testing.T) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case req := <-k.reqs:
		return req
	case <-time.After(3 * time.Second):
		t.Fatal("the plugin did not register in 3 s")
		return nil
	}
}

func dialPlugin(t *testing.T, path string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

func checkDevices(t *testing.T, client pluginapi.DevicePluginClient, uuids []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range resp.Devices {
		if d.Health != pluginapi.Healthy {
			t.Errorf("device %s is %s", d.ID, d.Health)
		}
		got = append(got, d.ID)
	}
	if !reflect.DeepEqual(got, uuids) {
		t.Errorf("devices %v, want %v", got, uuids)
	}
}

// TestAgainstFakeKubelet runs the plugin against a fake kubelet: it registers,
// serves ListAndWatch and Allocate, registers again after a kubelet restart, and
// removes its socket when stopped.
func TestAgainstFakeKubelet(t *testing.T) {
	dir := t.TempDir()
	idx, err := parseFixtureFile("testdata/g6e.12xlarge-4xL40S-pcie-node.topo-m.txt")
	if err != nil {
		t.Fatal(err)
	}
	c := &config{resource: "nvidia.com/gpu", dir: dir, endpoint: "podshaper-gpu.sock", poll: 20 * time.Millisecond}
	var logs syncbuf.Buffer
	var out io.Writer = &logs
	if testing.Verbose() {
		out = io.MultiWriter(&logs, os.Stderr)
	}
	c.logger = log.New(out, "plugin: ", log.Lmicroseconds)
	for _, i := range idx {
		c.uuids = append(c.uuids, fakeUUID("node-a", i))
	}

	// The plugin starts before kubelet, and waits for it.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	time.Sleep(3 * c.poll)
	kubelet := startFakeKubelet(t, dir)

	req := kubelet.waitRegister(t)
	if req.ResourceName != "nvidia.com/gpu" || req.Version != pluginapi.Version || req.Endpoint != "podshaper-gpu.sock" {
		t.Fatalf("Register(%+v): want nvidia.com/gpu, %s, podshaper-gpu.sock", req, pluginapi.Version)
	}
	client := dialPlugin(t, filepath.Join(dir, req.Endpoint))
	checkDevices(t, client, c.uuids)

	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	alloc, err := client.Allocate(ctx2, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIDs: []string{c.uuids[2], c.uuids[0]}},
		{DevicesIDs: []string{c.uuids[3]}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(alloc.ContainerResponses) != 2 {
		t.Fatalf("Allocate: %d container responses, want 2", len(alloc.ContainerResponses))
	}
	for i, want := range []string{c.uuids[2] + "," + c.uuids[0], c.uuids[3]} {
		r := alloc.ContainerResponses[i]
		if !reflect.DeepEqual(r.Envs, map[string]string{"NVIDIA_VISIBLE_DEVICES": want}) ||
			len(r.Devices) != 0 || len(r.Mounts) != 0 || len(r.Annotations) != 0 || len(r.CDIDevices) != 0 {
			t.Errorf("Allocate container %d: %+v, want only NVIDIA_VISIBLE_DEVICES=%s", i, r, want)
		}
	}
	if _, err := client.Allocate(ctx2, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIDs: []string{"GPU-nope"}}}}); err == nil {
		t.Error("Allocate of an unknown device: want an error")
	}
	opts, err := client.GetDevicePluginOptions(ctx2, &pluginapi.Empty{})
	if err != nil || opts.PreStartRequired || opts.GetPreferredAllocationAvailable {
		t.Errorf("GetDevicePluginOptions: %+v, %v; want no options", opts, err)
	}
	if _, err := client.PreStartContainer(ctx2, &pluginapi.PreStartContainerRequest{}); err != nil {
		t.Errorf("PreStartContainer: %v", err)
	}

	// kubelet restarts: it goes away, deletes the sockets in its directory, and
	// comes back with a new kubelet.sock. (First let the plugin see the Register
	// reply: Stop would cut it off, and a loaded machine can be that slow.)
	waitRegistrations(t, &logs, 1, c.poll)
	kubelet.server.Stop()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.Remove(filepath.Join(dir, e.Name()))
	}
	time.Sleep(3 * c.poll)
	kubelet = startFakeKubelet(t, dir)
	req = kubelet.waitRegister(t)
	if req.ResourceName != "nvidia.com/gpu" {
		t.Fatalf("Register after the restart: %+v", req)
	}
	checkDevices(t, dialPlugin(t, filepath.Join(dir, req.Endpoint)), c.uuids)
	if !strings.Contains(logs.String(), "was removed (kubelet restarted?)") {
		t.Errorf("want the plugin to have noticed its socket was removed; its log:\n%s", logs.String())
	}

	// kubelet.sock recreated while our socket survived: register again.
	waitRegistrations(t, &logs, 2, c.poll)
	kubelet.server.Stop()
	os.Remove(filepath.Join(dir, kubeletSocketName))
	kubelet = startFakeKubelet(t, dir)
	kubelet.waitRegister(t)
	checkDevices(t, dialPlugin(t, filepath.Join(dir, req.Endpoint)), c.uuids)
	if !strings.Contains(logs.String(), "kubelet.sock was recreated (kubelet restarted): registering again") {
		t.Errorf("want the plugin to have noticed kubelet.sock was recreated; its log:\n%s", logs.String())
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	if _, err := os.Stat(filepath.Join(dir, c.endpoint)); !os.IsNotExist(err) {
		t.Errorf("the plugin's socket is still there after it stopped (%v)", err)
	}
}

// waitRegistrations waits (up to 3 s) until the plugin has logged n registrations: the
// plugin has then read kubelet's Register reply.
func waitRegistrations(t *testing.T, logs *syncbuf.Buffer, n int, poll time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); strings.Count(logs.String(), "registered nvidia.com/gpu") < n; {
		if time.Now().After(deadline) {
			t.Fatalf("the plugin did not log registration %d; its log:\n%s", n, logs.String())
		}
		time.Sleep(poll)
	}
}
