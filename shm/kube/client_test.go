package kube

import (
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"podshaper.io/shm/usage"
)

// call is one request the fake API server got.
type call struct {
	Method, Path, ContentType, Auth string
	Body                            map[string]any
}

func (c call) String() string { return c.Method + " " + c.Path }

// reply is one scripted answer.
type reply struct {
	code int
	body string
}

// fakeAPI answers requests with its replies, in order, and records them.
type fakeAPI struct {
	t       *testing.T
	mu      sync.Mutex
	replies []reply
	calls   []call
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := call{Method: r.Method, Path: r.URL.Path, ContentType: r.Header.Get("Content-Type"), Auth: r.Header.Get("Authorization")}
	if b, _ := io.ReadAll(r.Body); len(b) > 0 {
		if err := json.Unmarshal(b, &c.Body); err != nil {
			f.t.Errorf("%s: the body is not JSON: %v", c, err)
		}
	}
	f.calls = append(f.calls, c)
	if len(f.replies) == 0 {
		f.t.Errorf("%s: not expected", c)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	next := f.replies[0]
	f.replies = f.replies[1:]
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(next.code)
	io.WriteString(w, next.body)
}

func (f *fakeAPI) requests() []string {
	var out []string
	for _, c := range f.calls {
		out = append(out, c.String())
	}
	return out
}

var now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// start runs a fake API server over TLS and a client of it, with token "t1".
func start(t *testing.T, replies ...reply) (*client, *fakeAPI, string) {
	t.Helper()
	f := &fakeAPI{t: t, replies: replies}
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	token := filepath.Join(dir, "token")
	write(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	write(t, token, "t1\n")
	c, err := New(Config{Server: srv.URL, TokenFile: token, CAFile: ca, UserAgent: "podshaper-shm/test", Node: "gpu-1"})
	if err != nil {
		t.Fatal(err)
	}
	c.(*client).now = func() time.Time { return now }
	return c.(*client), f, token
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func statusReply(code int, reason, message string) reply {
	return reply{code, fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"message":%q,"code":%d}`,
		reason, message, code)}
}

// usageReply is a ShmUsage as the API server returns it.
func usageReply(code int, podUID, rv, created string) reply {
	return reply{code, fmt.Sprintf(`{"apiVersion":"podshaper.io/v1alpha1","kind":"ShmUsage",
"metadata":{"name":"train-0","namespace":"ml","uid":"obj-%s","resourceVersion":%q,"creationTimestamp":%q},
"spec":{"podName":"train-0","podUID":%q,"nodeName":"gpu-1","volume":"podshaper-dshm","userVolume":false}}`,
		podUID, rv, created, podUID)}
}

var pod = PodRef{Namespace: "ml", Name: "train-0", UID: "uid-b"}

const (
	usages   = "/apis/podshaper.io/v1alpha1/namespaces/ml/shmusages"
	theUsage = usages + "/train-0"
)

// sample: two runs, the second still open.
func sample() *ShmUsage {
	t0 := time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC)
	return &ShmUsage{
		Pod: pod, Node: "gpu-1", Volume: "podshaper-dshm", Size: 1 << 30, Used: 300 << 20,
		ObservedAt: t0.Add(time.Hour),
		Runs: []usage.Run{
			{Number: 1, StartedAt: t0, EndedAt: t0.Add(10 * time.Minute), Size: 1 << 30, Peak: 950 << 20,
				PeakAt: t0.Add(9 * time.Minute), NearlyFull: true, Ended: "Error (exit 1)"},
			{Number: 2, StartedAt: t0.Add(10*time.Minute + 250*time.Microsecond), Size: 1 << 30, Peak: 400 << 20,
				PeakAt: t0.Add(30 * time.Minute)},
		},
	}
}

func TestEvent(t *testing.T) {
	c, f, _ := start(t, reply{201, `{}`})
	if err := c.Event(pod, "Warning", "ShmNearlyFull", "/dev/shm is 92% full"); err != nil {
		t.Fatal(err)
	}
	got := f.calls[0]
	if got.String() != "POST /api/v1/namespaces/ml/events" || got.ContentType != "application/json" || got.Auth != "Bearer t1" {
		t.Errorf("request %s, %q, %q", got, got.ContentType, got.Auth)
	}
	want := map[string]any{
		"apiVersion": "v1", "kind": "Event",
		"metadata":       map[string]any{"generateName": "train-0.", "namespace": "ml"},
		"involvedObject": map[string]any{"apiVersion": "v1", "kind": "Pod", "namespace": "ml", "name": "train-0", "uid": "uid-b"},
		"type":           "Warning", "reason": "ShmNearlyFull", "message": "/dev/shm is 92% full",
		"source":             map[string]any{"component": "podshaper-shm", "host": "gpu-1"},
		"reportingComponent": "podshaper-shm", "reportingInstance": "gpu-1",
		"firstTimestamp": "2026-11-26T12:00:00Z", "lastTimestamp": "2026-11-26T12:00:00Z", "count": float64(1),
	}
	if !reflect.DeepEqual(got.Body, want) {
		t.Errorf("event\n got %v\nwant %v", got.Body, want)
	}
}

func TestEventMessageCut(t *testing.T) {
	c, f, _ := start(t, reply{201, `{}`})
	long := strings.Repeat("a", 1023) + "é and more"
	if err := c.Event(pod, "Normal", "ShmUsage", long); err != nil {
		t.Fatal(err)
	}
	if got := f.calls[0].Body["message"]; got != strings.Repeat("a", 1023) {
		t.Errorf("message of %d bytes, cut inside é: got %d bytes", len(long), len(got.(string)))
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 1024, "short"},
		{strings.Repeat("x", 1025), 1024, strings.Repeat("x", 1024)},
		{strings.Repeat("é", 600), 1024, strings.Repeat("é", 512)},
		{"ab€", 4, "ab"}, // € is 3 bytes: not cut in its middle
		{"ab€", 5, "ab€"},
	} {
		if got := cut(tc.in, tc.n); got != tc.want {
			t.Errorf("cut(%q…, %d) = %q, want %q", tc.in[:min(len(tc.in), 8)], tc.n, got, tc.want)
		}
	}
}

func TestAPIErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reply   reply
		code    int
		reason  string
		message string
	}{
		{"a Status", statusReply(403, "Forbidden", `events is forbidden: User "system:serviceaccount:podshaper-node:podshaper-shm" cannot create resource "events"`),
			403, "Forbidden", `cannot create resource "events"`},
		{"no Status", reply{502, "upstream connect error\n"}, 502, "Bad Gateway", "upstream connect error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _ := start(t, tc.reply)
			err := c.Event(pod, "Normal", "ShmUsage", "peak")
			var a *APIError
			if !errors.As(err, &a) || a.Code != tc.code || a.Reason != tc.reason || !strings.Contains(a.Message, tc.message) {
				t.Fatalf("got %v", err)
			}
			if !strings.HasPrefix(err.Error(), "POST /api/v1/namespaces/ml/events: ") || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error text %q", err)
			}
		})
	}
}

func TestTokenReadOnEachRequest(t *testing.T) {
	c, f, token := start(t, reply{201, `{}`}, reply{201, `{}`})
	if err := c.Event(pod, "Normal", "ShmUsage", "one"); err != nil {
		t.Fatal(err)
	}
	write(t, token, "t2") // the kubelet rotated the projected token
	if err := c.Event(pod, "Normal", "ShmUsage", "two"); err != nil {
		t.Fatal(err)
	}
	if a, b := f.calls[0].Auth, f.calls[1].Auth; a != "Bearer t1" || b != "Bearer t2" {
		t.Errorf("Authorization %q then %q", a, b)
	}
}

func TestGetUsage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reply   reply
		want    bool   // a ShmUsage comes back
		wantErr string // in the error
	}{
		{"none", statusReply(404, "NotFound", `shmusages.podshaper.io "train-0" not found`), false, ""},
		{"an earlier pod's", usageReply(200, "uid-a", "7", "2026-11-26T10:00:00Z"), false, ""},
		{"this pod's", usageReply(200, "uid-b", "7", "2026-11-26T11:00:00Z"), true, ""},
		{"an API error", statusReply(500, "InternalError", "etcdserver: request timed out"), false, "etcdserver: request timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, f, _ := start(t, tc.reply)
			u, err := c.GetUsage(pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := f.requests(); !reflect.DeepEqual(got, []string{"GET " + theUsage}) {
				t.Errorf("requests %v", got)
			}
			if (u != nil) != tc.want {
				t.Fatalf("got %+v", u)
			}
			if u != nil && (u.Pod != pod || u.Node != "gpu-1" || u.Volume != "podshaper-dshm" || u.Runs != nil) {
				t.Errorf("got %+v", u)
			}
		})
	}
}

// What PutUsage writes, GetUsage reads back as it was.
func TestUsageRoundTrip(t *testing.T) {
	c, f, _ := start(t, usageReply(200, "uid-b", "7", "2026-11-26T11:00:00Z"), usageReply(200, "uid-b", "8", "2026-11-26T11:00:00Z"))
	want := sample()
	if err := c.PutUsage(want); err != nil {
		t.Fatal(err)
	}
	written, _ := json.Marshal(f.calls[1].Body["status"])
	stored := usageReply(200, "uid-b", "8", "2026-11-26T11:00:00Z")
	stored.body = strings.TrimSuffix(strings.TrimSpace(stored.body), "}") + `,"status":` + string(written) + "}"
	f.replies = append(f.replies, stored)
	got, err := c.GetUsage(pod)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back\n got %+v\nwant %+v", got, want)
	}
}

func TestPutUsage(t *testing.T) {
	ok := usageReply(200, "uid-b", "12", "2026-11-26T11:00:01Z")
	for _, tc := range []struct {
		name    string
		replies []reply
		want    []string
		wantErr string
	}{
		{"none: created, then its status",
			[]reply{statusReply(404, "NotFound", "not found"), usageReply(201, "uid-b", "11", "2026-11-26T11:00:01Z"), ok},
			[]string{"GET " + theUsage, "POST " + usages, "PATCH " + theUsage + "/status"}, ""},
		{"this pod's: its status",
			[]reply{usageReply(200, "uid-b", "11", "2026-11-26T11:00:01Z"), ok},
			[]string{"GET " + theUsage, "PATCH " + theUsage + "/status"}, ""},
		{"an earlier pod's: deleted, made anew",
			[]reply{usageReply(200, "uid-a", "5", "2026-11-26T09:00:00Z"), reply{200, `{}`},
				usageReply(201, "uid-b", "11", "2026-11-26T11:00:01Z"), ok},
			[]string{"GET " + theUsage, "DELETE " + theUsage, "POST " + usages, "PATCH " + theUsage + "/status"}, ""},
		{"an earlier pod's, gone meanwhile",
			[]reply{usageReply(200, "uid-a", "5", "2026-11-26T09:00:00Z"), statusReply(404, "NotFound", "not found"),
				usageReply(201, "uid-b", "11", "2026-11-26T11:00:01Z"), ok},
			[]string{"GET " + theUsage, "DELETE " + theUsage, "POST " + usages, "PATCH " + theUsage + "/status"}, ""},
		{"a later pod's: left alone",
			[]reply{usageReply(200, "uid-c", "5", "2026-11-26T11:30:00Z")},
			[]string{"GET " + theUsage}, "belongs to pod UID uid-c"},
		{"create refused",
			[]reply{statusReply(404, "NotFound", "not found"),
				statusReply(403, "Forbidden", "ValidatingAdmissionPolicy 'podshaper-shm-own-node' denied request")},
			[]string{"GET " + theUsage, "POST " + usages}, "denied request"},
		{"status refused",
			[]reply{usageReply(200, "uid-b", "11", "2026-11-26T11:00:01Z"), statusReply(422, "Invalid", "status.runs: Too many: 11")},
			[]string{"GET " + theUsage, "PATCH " + theUsage + "/status"}, "Too many"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, f, _ := start(t, tc.replies...)
			err := c.PutUsage(sample())
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if got := f.requests(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("requests\n got %v\nwant %v", got, tc.want)
			}
			for _, c := range f.calls {
				switch c.Method {
				case "POST":
					checkCreate(t, c)
				case "PATCH":
					checkPatch(t, c, "11")
				case "DELETE":
					if want := map[string]any{"uid": "obj-uid-a"}; !reflect.DeepEqual(c.Body["preconditions"], want) {
						t.Errorf("DELETE preconditions %v, want %v", c.Body["preconditions"], want)
					}
				}
			}
		})
	}
}

func checkCreate(t *testing.T, c call) {
	t.Helper()
	want := map[string]any{
		"apiVersion": "podshaper.io/v1alpha1", "kind": "ShmUsage",
		"metadata": map[string]any{"name": "train-0", "namespace": "ml", "ownerReferences": []any{
			map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "train-0", "uid": "uid-b", "blockOwnerDeletion": false}}},
		"spec": map[string]any{"podName": "train-0", "podUID": "uid-b", "nodeName": "gpu-1", "volume": "podshaper-dshm", "userVolume": false},
	}
	if !reflect.DeepEqual(c.Body, want) || c.ContentType != "application/json" {
		t.Errorf("POST %s\n got %v\nwant %v", c.ContentType, c.Body, want)
	}
}

func checkPatch(t *testing.T, c call, rv string) {
	t.Helper()
	want := map[string]any{
		"metadata": map[string]any{"resourceVersion": rv},
		"status": map[string]any{
			"sizeBytes": float64(1 << 30), "usedBytes": float64(300 << 20), "peakBytes": float64(400 << 20), "runCount": float64(2),
			"observedAt": "2026-11-26T12:00:00.000000Z",
			"runs": []any{
				map[string]any{"run": float64(1), "startedAt": "2026-11-26T11:00:00.000000Z", "endedAt": "2026-11-26T11:10:00.000000Z",
					"sizeBytes": float64(1 << 30), "peakBytes": float64(950 << 20), "peakAt": "2026-11-26T11:09:00.000000Z",
					"nearlyFull": true, "ended": "Error (exit 1)"},
				map[string]any{"run": float64(2), "startedAt": "2026-11-26T11:10:00.000250Z",
					"sizeBytes": float64(1 << 30), "peakBytes": float64(400 << 20), "peakAt": "2026-11-26T11:30:00.000000Z",
					"nearlyFull": false},
			},
		},
	}
	if !reflect.DeepEqual(c.Body, want) || c.ContentType != "application/merge-patch+json" {
		t.Errorf("PATCH %s\n got %v\nwant %v", c.ContentType, c.Body, want)
	}
}

// After a write, the next one is the status alone, at the version the last one returned;
// when that version is gone, the object is read again.
func TestPutUsageRemembers(t *testing.T) {
	c, f, _ := start(t,
		statusReply(404, "NotFound", "not found"), usageReply(201, "uid-b", "11", "2026-11-26T11:00:01Z"),
		usageReply(200, "uid-b", "12", "2026-11-26T11:00:01Z"),
		usageReply(200, "uid-b", "13", "2026-11-26T11:00:01Z"),
		statusReply(409, "Conflict", "the object has been modified"), usageReply(200, "uid-b", "20", "2026-11-26T11:00:01Z"),
		usageReply(200, "uid-b", "21", "2026-11-26T11:00:01Z"))
	for i := 0; i < 3; i++ {
		if err := c.PutUsage(sample()); err != nil {
			t.Fatal(err)
		}
	}
	patch := "PATCH " + theUsage + "/status"
	want := []string{"GET " + theUsage, "POST " + usages, patch, patch, patch, "GET " + theUsage, patch}
	if got := f.requests(); !reflect.DeepEqual(got, want) {
		t.Fatalf("requests\n got %v\nwant %v", got, want)
	}
	for i, rv := range map[int]string{2: "11", 3: "12", 4: "13", 6: "20"} {
		if got := f.calls[i].Body["metadata"]; !reflect.DeepEqual(got, map[string]any{"resourceVersion": rv}) {
			t.Errorf("request %d: metadata %v, want resourceVersion %s", i, got, rv)
		}
	}
	// Another pod of the same name: not the remembered object's.
	other := sample()
	other.Pod.UID = "uid-c"
	f.replies = []reply{usageReply(200, "uid-c", "30", "2026-11-26T11:00:01Z"), usageReply(200, "uid-c", "31", "2026-11-26T11:00:01Z")}
	f.calls = nil
	if err := c.PutUsage(other); err != nil {
		t.Fatal(err)
	}
	if got := f.requests(); !reflect.DeepEqual(got, []string{"GET " + theUsage, patch}) {
		t.Errorf("another pod's write: %v", got)
	}
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	write(t, notPEM, "hello")
	for _, tc := range []struct {
		name    string
		cfg     Config
		env     [2]string
		wantErr string
	}{
		{"no node", Config{Server: "https://x"}, [2]string{}, "node's name is empty"},
		{"not in a cluster", Config{Node: "n"}, [2]string{}, "not in a cluster"},
		{"a CA file without a certificate", Config{Server: "https://x", CAFile: notPEM, Node: "n"}, [2]string{}, "no PEM certificate in"},
		{"no token", Config{Server: "https://x", TokenFile: filepath.Join(dir, "none"), Node: "n"}, [2]string{}, "service account token"},
		{"no CA", Config{Node: "n", TokenFile: notPEM, CAFile: filepath.Join(dir, "none")}, [2]string{"10.0.0.1", "443"}, "the API server's CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", tc.env[0])
			t.Setenv("KUBERNETES_SERVICE_PORT", tc.env[1])
			if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// In-cluster: the server from KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
func TestNewInCluster(t *testing.T) {
	f := &fakeAPI{t: t, replies: []reply{{201, `{}`}}}
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca, token := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	write(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	write(t, token, "in-cluster")
	host, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "https://"), ":")
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Setenv("KUBERNETES_SERVICE_PORT", port)
	c, err := New(Config{TokenFile: token, CAFile: ca, Node: "gpu-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Event(pod, "Normal", "ShmUsage", "x"); err != nil {
		t.Fatal(err)
	}
	if got := f.calls[0].Auth; got != "Bearer in-cluster" {
		t.Errorf("Authorization %q", got)
	}
	if got := c.(*client).server; got != "https://"+host+":"+port {
		t.Errorf("server %q", got)
	}
}
