// Command podshaper-test-deviceplugin is test infrastructure, not part of podshaper:
// a kubelet device plugin that stands in for NVIDIA's k8s-device-plugin on a test
// node without GPUs. It advertises one nvidia.com/gpu device per GPU row of an
// `nvidia-smi topo -m` fixture (tests/fixtures/topologies/), all Healthy, with fake
// stable UUIDs (GPU-<hash of node name and index>), and on Allocate returns only
// NVIDIA_VISIBLE_DEVICES=<uuids>, what NVIDIA's plugin sets: no device nodes, no
// mounts, since there are no GPUs. It serves its gRPC socket in kubelet's
// device-plugins directory, registers with kubelet there, and serves and registers
// again whenever kubelet restarts (kubelet.sock recreated, or our socket removed).
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const kubeletSocketName = "kubelet.sock"

var gpuRow = regexp.MustCompile(`^GPU([0-9]+)$`)

// parseFixture returns the sorted, distinct GPU indices of an `nvidia-smi topo -m`
// output: the lines whose first field is GPU<n> (the header's first field, GPU0,
// is one of them and counts once).
func parseFixture(r io.Reader) ([]int, error) {
	seen := map[int]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		m := gpuRow.FindStringSubmatch(fields[0])
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("GPU row %q: %w", fields[0], err)
		}
		seen[n] = true
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(seen) == 0 {
		return nil, errors.New("no GPU rows (lines whose first field is GPU<n>)")
	}
	idx := make([]int, 0, len(seen))
	for n := range seen {
		idx = append(idx, n)
	}
	sort.Ints(idx)
	return idx, nil
}

func parseFixtureFile(path string) ([]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	idx, err := parseFixture(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return idx, nil
}

// fakeUUID is a stable, UUID-shaped GPU id for GPU index i of node: GPU-<8-4-4-4-12
// hex digits of sha256(node/i)>, the shape of NVIDIA's GPU UUIDs.
func fakeUUID(node string, i int) string {
	sum := sha256.Sum256([]byte(node + "/" + strconv.Itoa(i)))
	h := hex.EncodeToString(sum[:16])
	return "GPU-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// devicePlugin implements pluginapi.DevicePluginServer for a fixed set of devices.
type devicePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
	known   map[string]bool
	logger  *log.Logger
	stop    chan struct{} // closed when this server instance stops
}

func newDevicePlugin(uuids []string, logger *log.Logger) *devicePlugin {
	p := &devicePlugin{known: map[string]bool{}, logger: logger, stop: make(chan struct{})}
	for _, id := range uuids {
		p.devices = append(p.devices, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
		p.known[id] = true
	}
	return p
}

func (p *devicePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends every device Healthy once, then holds the stream open until
// kubelet goes away or the plugin stops (the devices never change).
func (p *devicePlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	select {
	case <-s.Context().Done():
	case <-p.stop:
	}
	return nil
}

// GetPreferredAllocation is not advertised (GetPreferredAllocationAvailable is
// false); if asked it prefers the required devices, then the available ones in order.
func (p *devicePlugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.GetContainerRequests() {
		picked := map[string]bool{}
		var ids []string
		for _, list := range [][]string{cr.GetMustIncludeDeviceIDs(), cr.GetAvailableDeviceIDs()} {
			for _, id := range list {
				if len(ids) < int(cr.GetAllocationSize()) && !picked[id] {
					picked[id] = true
					ids = append(ids, id)
				}
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// Allocate returns NVIDIA_VISIBLE_DEVICES=<uuids> for each container, and nothing else.
func (p *devicePlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.GetContainerRequests() {
		for _, id := range cr.GetDevicesIDs() {
			if !p.known[id] {
				return nil, fmt.Errorf("unknown device %q", id)
			}
		}
		visible := strings.Join(cr.GetDevicesIDs(), ",")
		p.logger.Printf("allocate: NVIDIA_VISIBLE_DEVICES=%s", visible)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": visible},
		})
	}
	return resp, nil
}

func (p *devicePlugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

type config struct {
	resource string
	dir      string // kubelet's device-plugins directory
	endpoint string // our socket's name in dir
	uuids    []string
	poll     time.Duration
	logger   *log.Logger
}

// served is one gRPC server instance on our socket.
type served struct {
	plugin *devicePlugin
	server *grpc.Server
	done   chan struct{}
	once   sync.Once
}

func (c *config) socketPath() string        { return filepath.Join(c.dir, c.endpoint) }
func (c *config) kubeletSocketPath() string { return filepath.Join(c.dir, kubeletSocketName) }

func (c *config) serve() (*served, error) {
	path := c.socketPath()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	s := &served{plugin: newDevicePlugin(c.uuids, c.logger), server: grpc.NewServer(), done: make(chan struct{})}
	pluginapi.RegisterDevicePluginServer(s.server, s.plugin)
	go func() {
		defer close(s.done)
		if err := s.server.Serve(l); err != nil {
			c.logger.Printf("serving %s: %v", path, err)
		}
	}()
	return s, nil
}

func (s *served) stopServing() {
	s.once.Do(func() {
		close(s.plugin.stop)
		s.server.Stop()
		<-s.done
	})
}

// register tells kubelet (Registration service on kubelet.sock) about our socket.
func (c *config) register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+c.kubeletSocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     c.endpoint,
		ResourceName: c.resource,
		Options:      &pluginapi.DevicePluginOptions{},
	})
	return err
}

// fileID identifies one incarnation of a file: a recreated socket differs.
type fileID struct {
	dev, ino uint64
	mtime    int64
}

func statID(path string) (fileID, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, false
	}
	id := fileID{mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), st.Ino
	}
	return id, true
}

// run serves and registers until ctx ends, and serves and registers again whenever
// kubelet restarts: its kubelet.sock is recreated, or our socket is removed (kubelet
// deletes the sockets in its directory when it starts).
func (c *config) run(ctx context.Context) error {
	var (
		cur        *served
		ourID      fileID
		kubeletID  fileID
		registered bool
		lastErr    string
	)
	stop := func() {
		if cur != nil {
			cur.stopServing()
			cur = nil
		}
		registered = false
	}
	defer func() {
		stop()
		if id, ok := statID(c.socketPath()); ok && id == ourID {
			os.Remove(c.socketPath())
		}
	}()
	tick := time.NewTicker(c.poll)
	defer tick.Stop()
	for {
		kid, kubeletUp := statID(c.kubeletSocketPath())
		if cur != nil {
			if id, ok := statID(c.socketPath()); !ok || id != ourID {
				c.logger.Printf("%s was removed (kubelet restarted?): serving again", c.socketPath())
				stop()
			} else if registered && kubeletUp && kid != kubeletID {
				c.logger.Printf("%s was recreated (kubelet restarted): registering again", c.kubeletSocketPath())
				stop()
			}
		}
		if !registered && !kubeletUp && lastErr != "waiting" {
			c.logger.Printf("waiting for kubelet's %s", c.kubeletSocketPath())
			lastErr = "waiting"
		}
		if !registered && kubeletUp {
			err := func() error {
				if cur == nil {
					s, err := c.serve()
					if err != nil {
						return fmt.Errorf("serving %s: %w", c.socketPath(), err)
					}
					cur = s
					ourID, _ = statID(c.socketPath())
				}
				if err := c.register(ctx); err != nil {
					return fmt.Errorf("registering with kubelet at %s: %w", c.kubeletSocketPath(), err)
				}
				return nil
			}()
			if err != nil {
				if err.Error() != lastErr {
					c.logger.Printf("%v (retrying every %s)", err, c.poll)
					lastErr = err.Error()
				}
			} else {
				registered, kubeletID, lastErr = true, kid, ""
				c.logger.Printf("registered %s with kubelet: %d devices on %s", c.resource, len(c.uuids), c.socketPath())
			}
		}
		select {
		case <-ctx.Done():
			c.logger.Printf("stopping")
			return nil
		case <-tick.C:
		}
	}
}

func main() {
	host, _ := os.Hostname()
	if env := os.Getenv("NODE_NAME"); env != "" {
		host = env
	}
	var (
		fixture   = flag.String("fixture", "", "`FILE` holding `nvidia-smi topo -m` output: one device per GPU<n> row (required)")
		resource  = flag.String("resource", "nvidia.com/gpu", "extended resource name to advertise")
		pluginDir = flag.String("plugin-dir", pluginapi.DevicePluginPath, "kubelet's device-plugins `DIR` (<kubelet root-dir>/device-plugins), holding kubelet.sock")
		endpoint  = flag.String("endpoint", "podshaper-gpu.sock", "name of this plugin's socket in -plugin-dir")
		node      = flag.String("node", host, "`NAME` of the node, seeds the fake GPU UUIDs GPU-<hash of node and index>; $NODE_NAME or the hostname when not given")
	)
	flag.Parse()
	logger := log.New(os.Stderr, "podshaper-test-deviceplugin: ", log.LstdFlags|log.Lmicroseconds)
	if *fixture == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: podshaper-test-deviceplugin -fixture FILE [-resource NAME] [-plugin-dir DIR] [-node NAME]")
		flag.PrintDefaults()
		os.Exit(2)
	}
	if strings.Contains(*endpoint, "/") || *endpoint == kubeletSocketName {
		logger.Fatalf("-endpoint must be a plain file name other than %s", kubeletSocketName)
	}
	idx, err := parseFixtureFile(*fixture)
	if err != nil {
		logger.Fatalf("fixture: %v", err)
	}
	c := &config{resource: *resource, dir: *pluginDir, endpoint: *endpoint, poll: time.Second, logger: logger}
	for _, i := range idx {
		c.uuids = append(c.uuids, fakeUUID(*node, i))
	}
	logger.Printf("%s: %d GPUs for node %q: %s", *fixture, len(c.uuids), *node, strings.Join(c.uuids, ","))

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	if err := c.run(ctx); err != nil {
		logger.Fatal(err)
	}
}
