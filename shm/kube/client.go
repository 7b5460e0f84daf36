package kube

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"podshaper.io/shm/usage"
)

// Config says where the API server is and how to authenticate: in-cluster (the service
// account's token, CA and KUBERNETES_SERVICE_HOST/PORT) when Server is empty.
type Config struct {
	Server    string // https://host:port; empty: in-cluster
	TokenFile string // read on each request (projected tokens rotate); in-cluster default: the service account's
	CAFile    string // PEM; in-cluster default: the service account's; empty otherwise: the system's roots
	UserAgent string
	Node      string // the node this runs on: the Events' source.host and reportingInstance
}

// Where a pod's service account is mounted.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Timeout bounds each request, from connecting to the last byte of the answer.
const Timeout = 10 * time.Second

// MessageMax: an Event's message is cut to this many bytes (at a character's boundary).
const MessageMax = 1024

// The ShmUsage API (crds/shmusages.podshaper.io.yaml).
const (
	group      = "podshaper.io"
	apiVersion = group + "/v1alpha1"
	kindUsage  = "ShmUsage"
)

// timeFormat: UTC with microseconds (metav1.MicroTime's), so that a run's times read back
// after a restart are the ones written.
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

// APIError is the API server's refusal: the HTTP status and the Status object's reason and
// message.
type APIError struct {
	Method, Path string
	Code         int
	Reason       string // NotFound, Conflict, Forbidden, ...; the HTTP status text when no Status came
	Message      string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Reason, e.Message)
}

// Permanent says whether err is an answer that the same request would get again: a 4xx
// other than 409 (Conflict) and 429 (TooManyRequests), such as 403, 404 or 422.
func Permanent(err error) bool {
	var a *APIError
	return errors.As(err, &a) && a.Code >= 400 && a.Code < 500 && a.Code != 409 && a.Code != 429
}

// isCode says whether err is the API server's answer with this HTTP status.
func isCode(err error, code int) bool {
	var a *APIError
	return errors.As(err, &a) && a.Code == code
}

type client struct {
	server, tokenFile, userAgent, node string
	http                               *http.Client
	now                                func() time.Time

	mu    sync.Mutex
	known map[string]written // by "namespace/name": the ShmUsage last read or written
}

// written is a ShmUsage as the API server last returned it: whose it is and its version,
// the precondition of the next status write.
type written struct{ podUID, resourceVersion string }

// New returns the real Client.
func New(cfg Config) (Client, error) {
	if cfg.Node == "" {
		return nil, errors.New("kube: the node's name is empty")
	}
	server := cfg.Server
	if server == "" {
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" || port == "" {
			return nil, errors.New("kube: not in a cluster (KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT unset) and no server given")
		}
		server = "https://" + net.JoinHostPort(host, port)
		if cfg.TokenFile == "" {
			cfg.TokenFile = serviceAccountDir + "/token"
		}
		if cfg.CAFile == "" {
			cfg.CAFile = serviceAccountDir + "/ca.crt"
		}
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kube: the API server's CA: %w", err)
		}
		tlsConfig.RootCAs = x509.NewCertPool()
		if !tlsConfig.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kube: the API server's CA: no PEM certificate in %s", cfg.CAFile)
		}
	}
	c := &client{
		server:    strings.TrimSuffix(server, "/"),
		tokenFile: cfg.TokenFile,
		userAgent: cfg.UserAgent,
		node:      cfg.Node,
		http: &http.Client{Timeout: Timeout, Transport: &http.Transport{
			TLSClientConfig:     tlsConfig,
			TLSHandshakeTimeout: Timeout,
			IdleConnTimeout:     90 * time.Second,
		}},
		now:   time.Now,
		known: map[string]written{},
	}
	if _, err := c.token(); err != nil {
		return nil, err
	}
	return c, nil
}

// token reads the bearer token now: a projected token is rotated in place.
func (c *client) token() (string, error) {
	if c.tokenFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return "", fmt.Errorf("kube: the service account token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// do sends one request (body, when not nil, as JSON of contentType) and decodes a
// successful answer into out, when not nil.
func (c *client) do(method, path, contentType string, body, out any) error {
	var reader io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		reader = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.server+path, reader)
	if err != nil {
		return err
	}
	token, err := c.token()
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Method: method, Path: path, Code: resp.StatusCode}
		var status struct{ Reason, Message string }
		if json.Unmarshal(answer, &status) == nil && status.Message != "" {
			e.Reason, e.Message = status.Reason, status.Message
		} else {
			e.Message = cut(strings.TrimSpace(string(answer)), 256)
		}
		if e.Reason == "" {
			e.Reason = http.StatusText(resp.StatusCode)
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			return fmt.Errorf("%s %s: the answer: %w", method, path, err)
		}
	}
	return nil
}

// cut s to at most n bytes, at a character's boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func (c *client) Event(pod PodRef, typ, reason, message string) error {
	now := c.now().UTC().Format(time.RFC3339)
	event := map[string]any{
		"apiVersion": "v1",
		"kind":       "Event",
		"metadata":   map[string]any{"generateName": pod.Name + ".", "namespace": pod.Namespace},
		"involvedObject": map[string]any{
			"apiVersion": "v1", "kind": "Pod", "namespace": pod.Namespace, "name": pod.Name, "uid": pod.UID,
		},
		"type":               typ,
		"reason":             reason,
		"message":            cut(message, MessageMax),
		"source":             map[string]any{"component": "podshaper-shm", "host": c.node},
		"reportingComponent": "podshaper-shm",
		"reportingInstance":  c.node,
		"firstTimestamp":     now,
		"lastTimestamp":      now,
		"count":              1,
	}
	return c.do("POST", "/api/v1/namespaces/"+pod.Namespace+"/events", "application/json", event, nil)
}

// object is a ShmUsage as the API has it.
type object struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Metadata   meta    `json:"metadata"`
	Spec       spec    `json:"spec"`
	Status     *status `json:"status,omitempty"`
}

type meta struct {
	Name              string     `json:"name"`
	Namespace         string     `json:"namespace"`
	UID               string     `json:"uid,omitempty"`
	ResourceVersion   string     `json:"resourceVersion,omitempty"`
	CreationTimestamp string     `json:"creationTimestamp,omitempty"`
	OwnerReferences   []ownerRef `json:"ownerReferences,omitempty"`
}

type ownerRef struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	BlockOwnerDeletion bool   `json:"blockOwnerDeletion"`
}

type spec struct {
	PodName    string `json:"podName"`
	PodUID     string `json:"podUID"`
	NodeName   string `json:"nodeName"`
	Volume     string `json:"volume"`
	UserVolume bool   `json:"userVolume"`
}

type status struct {
	SizeBytes  int64  `json:"sizeBytes"`
	UsedBytes  int64  `json:"usedBytes"`
	PeakBytes  int64  `json:"peakBytes"` // the current or last run's
	RunCount   int    `json:"runCount"`  // the last run's number: runs since the pod started
	ObservedAt string `json:"observedAt,omitempty"`
	Runs       []run  `json:"runs"`
}

type run struct {
	Run        int    `json:"run"`
	StartedAt  string `json:"startedAt"`
	EndedAt    string `json:"endedAt,omitempty"`
	SizeBytes  int64  `json:"sizeBytes"`
	PeakBytes  int64  `json:"peakBytes"`
	PeakAt     string `json:"peakAt,omitempty"`
	NearlyFull bool   `json:"nearlyFull"`
	Ended      string `json:"ended,omitempty"`
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeFormat)
}

// unstamp reads a time the API returned; "" (or one that does not parse) is the zero time.
func unstamp(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

func statusOf(u *ShmUsage) *status {
	s := &status{SizeBytes: u.Size, UsedBytes: u.Used, ObservedAt: stamp(u.ObservedAt), Runs: []run{}}
	for _, r := range u.Runs {
		s.Runs = append(s.Runs, run{
			Run: r.Number, StartedAt: stamp(r.StartedAt), EndedAt: stamp(r.EndedAt), SizeBytes: r.Size,
			PeakBytes: r.Peak, PeakAt: stamp(r.PeakAt), NearlyFull: r.NearlyFull, Ended: r.Ended,
		})
	}
	if n := len(u.Runs); n > 0 {
		s.PeakBytes, s.RunCount = u.Runs[n-1].Peak, u.Runs[n-1].Number
	}
	return s
}

func usageOf(o *object) *ShmUsage {
	u := &ShmUsage{
		Pod:        PodRef{Namespace: o.Metadata.Namespace, Name: o.Spec.PodName, UID: o.Spec.PodUID},
		Node:       o.Spec.NodeName,
		Volume:     o.Spec.Volume,
		UserVolume: o.Spec.UserVolume,
	}
	if s := o.Status; s != nil {
		u.Size, u.Used, u.ObservedAt = s.SizeBytes, s.UsedBytes, unstamp(s.ObservedAt)
		for _, r := range s.Runs {
			u.Runs = append(u.Runs, usage.Run{
				Number: r.Run, StartedAt: unstamp(r.StartedAt), EndedAt: unstamp(r.EndedAt), Size: r.SizeBytes,
				Peak: r.PeakBytes, PeakAt: unstamp(r.PeakAt), NearlyFull: r.NearlyFull, Ended: r.Ended,
			})
		}
	}
	return u
}

func usagesPath(ns string) string { return "/apis/" + apiVersion + "/namespaces/" + ns + "/shmusages" }

func usagePath(pod PodRef) string { return usagesPath(pod.Namespace) + "/" + pod.Name }

func (c *client) remember(o *object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.known[o.Metadata.Namespace+"/"+o.Metadata.Name] = written{o.Spec.PodUID, o.Metadata.ResourceVersion}
}

func (c *client) recall(pod PodRef) (written, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.known[pod.Namespace+"/"+pod.Name]
	return w, ok && w.podUID == pod.UID
}

func (c *client) forget(pod PodRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.known, pod.Namespace+"/"+pod.Name)
}

func (c *client) GetUsage(pod PodRef) (*ShmUsage, error) {
	var o object
	err := c.do("GET", usagePath(pod), "", nil, &o)
	if isCode(err, http.StatusNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if o.Spec.PodUID != pod.UID {
		return nil, nil
	}
	c.remember(&o)
	return usageOf(&o), nil
}

// PutUsage writes the status with the resourceVersion last seen as its precondition. A
// ShmUsage of another pod of the same name is replaced when it was made before this pod's
// first run started (an earlier pod's, which the garbage collector has not removed yet);
// one made after it is a later pod's, and PutUsage fails rather than delete it.
func (c *client) PutUsage(u *ShmUsage) error {
	st := statusOf(u)
	if w, ok := c.recall(u.Pod); ok {
		err := c.patchStatus(u.Pod, w.resourceVersion, st)
		if !isCode(err, http.StatusNotFound) && !isCode(err, http.StatusConflict) {
			return err
		}
		c.forget(u.Pod) // replaced or changed since: read it again
	}
	var o object
	err := c.do("GET", usagePath(u.Pod), "", nil, &o)
	switch {
	case isCode(err, http.StatusNotFound):
		return c.create(u, st)
	case err != nil:
		return err
	case o.Spec.PodUID == u.Pod.UID:
		return c.patchStatus(u.Pod, o.Metadata.ResourceVersion, st)
	}
	if started := firstSeen(u); !started.IsZero() && unstamp(o.Metadata.CreationTimestamp).After(started) {
		return fmt.Errorf("ShmUsage %s/%s belongs to pod UID %s, made at %s, after this pod (UID %s) started: left alone",
			u.Pod.Namespace, u.Pod.Name, o.Spec.PodUID, o.Metadata.CreationTimestamp, u.Pod.UID)
	}
	del := map[string]any{"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": map[string]any{"uid": o.Metadata.UID}}
	if err := c.do("DELETE", usagePath(u.Pod), "application/json", del, nil); err != nil && !isCode(err, http.StatusNotFound) {
		return err
	}
	return c.create(u, st)
}

// firstSeen: when the pod's first run kept started, else when it was observed.
func firstSeen(u *ShmUsage) time.Time {
	if len(u.Runs) > 0 {
		return u.Runs[0].StartedAt
	}
	return u.ObservedAt
}

// create makes the object, owned by the pod, then writes its status (the status
// subresource ignores a status given on create).
func (c *client) create(u *ShmUsage, st *status) error {
	o := object{
		APIVersion: apiVersion,
		Kind:       kindUsage,
		Metadata: meta{
			Name: u.Pod.Name, Namespace: u.Pod.Namespace,
			OwnerReferences: []ownerRef{{APIVersion: "v1", Kind: "Pod", Name: u.Pod.Name, UID: u.Pod.UID}},
		},
		Spec: spec{PodName: u.Pod.Name, PodUID: u.Pod.UID, NodeName: u.Node, Volume: u.Volume, UserVolume: u.UserVolume},
	}
	var made object
	if err := c.do("POST", usagesPath(u.Pod.Namespace), "application/json", &o, &made); err != nil {
		return err
	}
	return c.patchStatus(u.Pod, made.Metadata.ResourceVersion, st)
}

// patchStatus merges the status in, if the object is still at resourceVersion.
func (c *client) patchStatus(pod PodRef, resourceVersion string, st *status) error {
	patch := map[string]any{"metadata": map[string]any{"resourceVersion": resourceVersion}, "status": st}
	var o object
	if err := c.do("PATCH", usagePath(pod)+"/status", "application/merge-patch+json", patch, &o); err != nil {
		return err
	}
	c.remember(&o)
	return nil
}
