// podshaper-loadgen drives an admission webhook with AdmissionReview POSTs over
// HTTPS keep-alive connections (HTTP/1.1, TLS 1.2+, one connection per worker) and
// prints what it measured as one JSON object.
//
//	podshaper-loadgen --url https://127.0.0.1:PORT/mutate-v1-pod --body FILE --ca FILE
//	    [--connections N] [--warmup S] --duration S --mode saturate [--json]
//	podshaper-loadgen ... --mode fixed --rate R --duration S [--json]
//
// saturate: a closed loop; each connection sends its next request when the last
// answer arrives. fixed: an open loop; request i is due at start + i/R and its latency
// is measured from that due time, so a slow answer that holds up the requests behind
// it counts against them too (no coordinated omission).
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

type options struct {
	url         string
	body        []byte
	ca          *x509.CertPool
	connections int
	duration    time.Duration
	warmup      time.Duration
	mode        string
	rate        float64
	jsonOut     bool
}

// worker is one keep-alive connection and what was measured on it.
type worker struct {
	client   *http.Client
	opts     *options
	samples  []time.Duration
	ok       int64
	errors   map[string]int64
	sent     int64 // request body bytes
	received int64 // response body bytes
	lastDone time.Time
	lags     []time.Duration // fixed: how late each request went out
	service  []time.Duration // fixed: latency from the actual send
	lastErr  error
	dials    *atomic.Int64
}

func newWorker(o *options, dials *atomic.Int64) *worker {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: o.ca, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   false, // HTTP/1.1 keep-alive, as the API server talks to webhooks
		MaxConnsPerHost:     1,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1) // more than one per worker means keep-alive broke
			return dialer.DialContext(ctx, network, addr)
		},
	}
	return &worker{
		client: &http.Client{Transport: transport, Timeout: 10 * time.Second},
		opts:   o,
		errors: map[string]int64{},
		dials:  dials,
	}
}

type reviewResponse struct {
	Response *struct {
		Allowed *bool `json:"allowed"`
	} `json:"response"`
}

// do sends one review and returns an error kind ("" on success) and the
// response body's size.
func (w *worker) do(buf *bytes.Buffer) (string, int) {
	req, err := http.NewRequest(http.MethodPost, w.opts.url, bytes.NewReader(w.opts.body))
	if err != nil {
		return "request", 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		w.lastErr = err
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() {
			return "timeout", 0
		}
		return "transport", 0
	}
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "read", buf.Len()
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("http_%d", resp.StatusCode), buf.Len()
	}
	var r reviewResponse
	if err := json.Unmarshal(buf.Bytes(), &r); err != nil || r.Response == nil || r.Response.Allowed == nil {
		return "bad_review", buf.Len()
	}
	return "", buf.Len()
}

func (w *worker) record(latency time.Duration, failure string, received int, measured bool) {
	if !measured {
		return
	}
	w.lastDone = time.Now()
	w.sent += int64(len(w.opts.body))
	w.received += int64(received)
	if failure != "" {
		w.errors[failure]++
		return
	}
	w.ok++
	w.samples = append(w.samples, latency)
}

// saturate: each worker sends back to back until the end.
func (w *worker) saturate(measureFrom, end time.Time) {
	var buf bytes.Buffer
	for {
		start := time.Now()
		if !start.Before(end) {
			return
		}
		failure, n := w.do(&buf)
		w.record(time.Since(start), failure, n, !start.Before(measureFrom))
	}
}

// fixed: the workers take request numbers in order; request i is due at
// start + i×interval, and its latency runs from the due time.
func (w *worker) fixed(next *atomic.Int64, start time.Time, interval time.Duration, measureFrom, end time.Time) {
	var buf bytes.Buffer
	for {
		i := next.Add(1) - 1
		due := start.Add(time.Duration(i) * interval)
		if !due.Before(end) {
			return
		}
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		sent := time.Now()
		failure, n := w.do(&buf)
		w.record(time.Since(due), failure, n, !due.Before(measureFrom))
		if !due.Before(measureFrom) && failure == "" {
			w.lags = append(w.lags, sent.Sub(due))
			w.service = append(w.service, time.Since(sent))
		}
	}
}

// connect opens the worker's connection (TLS handshake included) with one review,
// before the clock starts.
func (w *worker) connect() error {
	var buf bytes.Buffer
	if failure, _ := w.do(&buf); failure != "" {
		if w.lastErr != nil {
			return fmt.Errorf("first review: %w", w.lastErr)
		}
		return fmt.Errorf("first review: %s: %s", failure, bytes.TrimSpace(buf.Bytes()))
	}
	return nil
}

func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	// Nearest rank: the smallest sample with at least p% of samples at or below it.
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return ms(sorted[rank-1])
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 } // ms, µs precision

func parse() (*options, error) {
	o := &options{}
	var bodyFile, caFile string
	var duration, warmup float64
	flag.StringVar(&o.url, "url", "", "webhook URL, e.g. https://127.0.0.1:8443/mutate-v1-pod")
	flag.StringVar(&bodyFile, "body", "", "AdmissionReview JSON to POST")
	flag.StringVar(&caFile, "ca", "", "PEM CA (or the self-signed certificate) the server's certificate must verify against")
	flag.IntVar(&o.connections, "connections", 0, "connections, one per worker (default: 4 saturate, 32 fixed)")
	flag.Float64Var(&duration, "duration", 10, "seconds measured")
	flag.Float64Var(&warmup, "warmup", 1, "seconds of load before measuring (not counted)")
	flag.StringVar(&o.mode, "mode", "", "saturate (closed loop) or fixed (open loop at --rate)")
	flag.Float64Var(&o.rate, "rate", 0, "requests per second, for --mode fixed")
	flag.BoolVar(&o.jsonOut, "json", false, "print one JSON object (the default prints it indented)")
	flag.Parse()
	if flag.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", flag.Arg(0))
	}
	if o.url == "" || bodyFile == "" || caFile == "" {
		return nil, errors.New("--url, --body and --ca are required")
	}
	var err error
	if o.body, err = os.ReadFile(bodyFile); err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	o.ca = x509.NewCertPool()
	if !o.ca.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca %s: no PEM certificate", caFile)
	}
	switch o.mode {
	case "saturate":
		if o.connections == 0 {
			o.connections = 4
		}
	case "fixed":
		if o.rate <= 0 {
			return nil, errors.New("--mode fixed needs --rate > 0")
		}
		if o.connections == 0 {
			o.connections = 32
		}
	default:
		return nil, errors.New("--mode must be saturate or fixed")
	}
	if o.connections < 1 || o.connections > 10000 {
		return nil, errors.New("--connections must be 1..10000")
	}
	if duration <= 0 || warmup < 0 {
		return nil, errors.New("--duration must be > 0 and --warmup >= 0")
	}
	o.duration = time.Duration(duration * float64(time.Second))
	o.warmup = time.Duration(warmup * float64(time.Second))
	return o, nil
}

func main() {
	o, err := parse()
	if err != nil {
		fmt.Fprintln(os.Stderr, "podshaper-loadgen:", err)
		os.Exit(2)
	}
	workers := make([]*worker, o.connections)
	var dials atomic.Int64
	for i := range workers {
		workers[i] = newWorker(o, &dials)
		if err := workers[i].connect(); err != nil {
			fmt.Fprintf(os.Stderr, "podshaper-loadgen: connecting to %s: %v\n", o.url, err)
			os.Exit(1)
		}
	}

	start := time.Now()
	measureFrom := start.Add(o.warmup)
	end := measureFrom.Add(o.duration)
	var wg sync.WaitGroup
	var next atomic.Int64
	interval := time.Duration(0)
	if o.mode == "fixed" {
		interval = time.Duration(float64(time.Second) / o.rate)
	}
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o.mode == "saturate" {
				w.saturate(measureFrom, end)
			} else {
				w.fixed(&next, start, interval, measureFrom, end)
			}
		}()
	}
	wg.Wait()
	finished := time.Now()

	var samples, lags, service []time.Duration
	var ok, sent, received int64
	lastDone := end
	errorKinds := map[string]int64{}
	var errorCount int64
	for _, w := range workers {
		samples = append(samples, w.samples...)
		lags = append(lags, w.lags...)
		service = append(service, w.service...)
		ok += w.ok
		sent += w.sent
		received += w.received
		if w.lastDone.After(lastDone) {
			lastDone = w.lastDone
		}
		for k, v := range w.errors {
			errorKinds[k] += v
			errorCount += v
		}
	}
	slices.Sort(samples)
	slices.Sort(lags)
	slices.Sort(service)
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	mean := 0.0
	if len(samples) > 0 {
		mean = ms(sum / time.Duration(len(samples)))
	}
	requests := ok + errorCount
	// saturate: answers to requests started in the window, over the window; fixed:
	// answers to requests due in the window, over the window.
	seconds := o.duration.Seconds()
	out := map[string]any{
		"url":                o.url,
		"mode":               o.mode,
		"connections":        o.connections,
		"warmup_s":           o.warmup.Seconds(),
		"duration_s":         seconds,
		"requests":           requests,
		"ok":                 ok,
		"errors":             errorCount,
		"error_kinds":        errorKinds,
		"requests_per_s":     math.Round(float64(ok)/seconds*10) / 10,
		"request_body_bytes": len(o.body),
		"bytes_sent":         sent,
		"bytes_received":     received,
		"latency_ms": map[string]float64{
			"mean": mean, "p50": percentile(samples, 50), "p90": percentile(samples, 90),
			"p99": percentile(samples, 99), "p99.9": percentile(samples, 99.9),
			"max": percentile(samples, 100),
		},
		"drain_s":    math.Round(max(finished.Sub(end), 0).Seconds()*1e3) / 1e3,
		"gomaxprocs": runtime.GOMAXPROCS(0),
		"dials":      dials.Load(),
	}
	if requests > 0 {
		out["response_bytes_mean"] = received / requests
	}
	if o.mode == "fixed" {
		// Requests due in the window, over the time until the last of them was answered
		// (the window itself when the server kept up).
		out["target_rate"] = o.rate
		out["achieved_rate"] = math.Round(float64(ok)/lastDone.Sub(measureFrom).Seconds()*10) / 10
		out["latency_from"] = "scheduled send time"
		// How late requests went out (sleep overshoot, or every connection busy).
		out["send_lag_ms"] = map[string]float64{"p50": percentile(lags, 50), "p99": percentile(lags, 99), "max": percentile(lags, 100)}
		// The same requests timed from their actual send (what coordinated omission would report).
		out["service_ms"] = map[string]float64{"p50": percentile(service, 50), "p99": percentile(service, 99),
			"p99.9": percentile(service, 99.9), "max": percentile(service, 100)}
	} else {
		out["latency_from"] = "actual send time"
	}
	enc := json.NewEncoder(os.Stdout)
	if !o.jsonOut {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(out); err != nil {
		os.Exit(1)
	}
	if ok == 0 {
		os.Exit(1)
	}
}
