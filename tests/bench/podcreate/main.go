// podshaper-podcreate creates pods through a real API server with client-go and times
// each create call: the end-to-end cost of admission (podshaper-webhook included when
// the pods opt in) as a client sees it. Prints one JSON object.
//
//	podshaper-podcreate --kubeconfig FILE --namespace NS --count N [--concurrency C]
//	    [--opt-in] [--scheduler-name NAME] [--cleanup] [--samples FILE] [--json]
//
// The pod is a realistic 8-GPU training pod (the e2e test's: one trainer container
// with nvidia.com/gpu, memory and cpu, the DataLoader annotations, the GPU toleration).
// --opt-in adds the label podshaper.io/inject=true, so the MutatingWebhookConfiguration's
// objectSelector sends it to podshaper-webhook; without it the API server skips the
// webhook call entirely, and the two runs differ only by that label.
//
// C workers take pod numbers in order and create back to back (a closed loop);
// creates_per_s is the pods created over the wall time from the first call to the last
// answer. Client-side rate limiting is raised (--qps, --burst) so it never waits.
// An opted-in pod must come back shaped (podshaper.io/shaped-by set) and a plain one
// must not: `shaped` counts them, and a mismatch is an error of kind "not_shaped" or
// "shaped_without_opt_in".
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	benchLabel    = "podshaper.io/bench"
	runLabel      = "podshaper.io/bench-run"
	injectLabel   = "podshaper.io/inject"
	shapedByAnnot = "podshaper.io/shaped-by"
)

type options struct {
	kubeconfig    string
	namespace     string
	count         int
	concurrency   int
	optIn         bool
	gpus          int
	schedulerName string
	prefix        string
	qps           float64
	burst         int
	timeout       time.Duration
	protobuf      bool
	cleanup       bool
	jsonOut       bool
	samplesFile   string
}

// countingWarnings counts the warnings the API server returns (podshaper's admission
// warnings among them) instead of logging one line per pod.
type countingWarnings struct{ n atomic.Int64 }

var _ rest.WarningHandler = (*countingWarnings)(nil)

func (w *countingWarnings) HandleWarningHeader(code int, agent string, text string) {
	if code == 299 && text != "" {
		w.n.Add(1)
	}
}

func trainingPod(o *options, run string, i int) *corev1.Pod {
	labels := map[string]string{"app": "podcreate", benchLabel: "podcreate", runLabel: run}
	if o.optIn {
		labels[injectLabel] = "true"
	}
	res := corev1.ResourceList{
		"nvidia.com/gpu":      resource.MustParse(strconv.Itoa(o.gpus)),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourceCPU:    resource.MustParse("8"),
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("%s-%s-%d", o.prefix, run, i),
			Labels: labels,
			Annotations: map[string]string{
				"podshaper.io/dataloader-workers": "8",
				"podshaper.io/prefetch-factor":    "4",
				"podshaper.io/batch-shape":        "32x3x224x224",
				"podshaper.io/batch-dtype":        "float32",
			},
		},
		Spec: corev1.PodSpec{
			SchedulerName: o.schedulerName,
			Containers: []corev1.Container{{
				Name:      "trainer",
				Image:     "pytorch:2",
				Resources: corev1.ResourceRequirements{Limits: res, Requests: res.DeepCopy()},
			}},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
		},
	}
}

type result struct {
	latency time.Duration
	failure string // "" on success
	shaped  bool
}

func errorKind(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	if status, ok := err.(apierrors.APIStatus); ok || errors.As(err, &status) {
		if r := string(status.Status().Reason); r != "" {
			return r
		}
		return fmt.Sprintf("http_%d", status.Status().Code)
	}
	return "transport"
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
	flag.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	flag.StringVar(&o.namespace, "namespace", "", "namespace to create the pods in (must exist)")
	flag.IntVar(&o.count, "count", 100, "pods to create")
	flag.IntVar(&o.concurrency, "concurrency", 1, "workers creating back to back (1: sequential, for latency)")
	flag.BoolVar(&o.optIn, "opt-in", false, "label the pods podshaper.io/inject=true (the webhook shapes them)")
	flag.IntVar(&o.gpus, "gpus", 8, "nvidia.com/gpu per pod")
	flag.StringVar(&o.schedulerName, "scheduler-name", "", "spec.schedulerName (empty: the default scheduler)")
	flag.StringVar(&o.prefix, "prefix", "podcreate", "pod name prefix; names are PREFIX-RUN-I")
	flag.Float64Var(&o.qps, "qps", 1000, "client-go QPS (raised so client-side throttling does not limit)")
	flag.IntVar(&o.burst, "burst", 1000, "client-go burst")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "per create call")
	flag.BoolVar(&o.protobuf, "protobuf", false, "send protobuf, as built-in controllers do (default: JSON, client-go's default)")
	flag.BoolVar(&o.cleanup, "cleanup", false, "delete this run's pods afterwards (grace period 0: no kubelet runs)")
	flag.StringVar(&o.samplesFile, "samples", "", "also write every successful create's latency (ms, in creation order) as a JSON array to FILE")
	flag.BoolVar(&o.jsonOut, "json", false, "print one JSON object on one line (the default indents it)")
	flag.Parse()
	if flag.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", flag.Arg(0))
	}
	if o.kubeconfig == "" || o.namespace == "" {
		return nil, errors.New("--kubeconfig and --namespace are required")
	}
	if o.count < 1 || o.concurrency < 1 || o.concurrency > 1000 {
		return nil, errors.New("--count must be >= 1 and --concurrency 1..1000")
	}
	if o.gpus < 1 {
		return nil, errors.New("--gpus must be >= 1")
	}
	return o, nil
}

func deleteRun(ctx context.Context, client kubernetes.Interface, o *options, run string) (int, error) {
	zero := int64(0)
	selector := runLabel + "=" + run
	pods := client.CoreV1().Pods(o.namespace)
	before, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return 0, err
	}
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{LabelSelector: selector}); err != nil {
		return 0, err
	}
	// Grace period 0 removes them at once (no finalizers); wait until the list agrees.
	deadline := time.Now().Add(60 * time.Second)
	for {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return 0, err
		}
		if len(list.Items) == 0 {
			return len(before.Items), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d pods of run %s still listed after 60s", len(list.Items), run)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func main() {
	o, err := parse()
	if err != nil {
		fmt.Fprintln(os.Stderr, "podshaper-podcreate:", err)
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "podshaper-podcreate:", err)
		os.Exit(1)
	}
	cfg.QPS = float32(o.qps)
	cfg.Burst = o.burst
	cfg.UserAgent = "podshaper-podcreate"
	warnings := &countingWarnings{}
	cfg.WarningHandler = warnings
	if o.protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "podshaper-podcreate:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	// The connection (TLS, HTTP/2) is opened before the clock starts.
	if _, err := client.CoreV1().Namespaces().Get(ctx, o.namespace, metav1.GetOptions{}); err != nil {
		fmt.Fprintf(os.Stderr, "podshaper-podcreate: namespace %s: %v\n", o.namespace, err)
		os.Exit(1)
	}
	run := strconv.FormatInt(time.Now().UnixNano()%(36*36*36*36*36*36), 36)

	results := make([]result, o.count)
	var next atomic.Int64
	var lastErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range o.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pods := client.CoreV1().Pods(o.namespace)
			for {
				i := int(next.Add(1) - 1)
				if i >= o.count {
					return
				}
				pod := trainingPod(o, run, i)
				callCtx, cancel := context.WithTimeout(ctx, o.timeout)
				t0 := time.Now()
				created, err := pods.Create(callCtx, pod, metav1.CreateOptions{})
				d := time.Since(t0)
				cancel()
				r := result{latency: d}
				if err != nil {
					r.failure = errorKind(err)
					lastErr.Store(err.Error())
				} else {
					_, r.shaped = created.Annotations[shapedByAnnot]
					if o.optIn && !r.shaped {
						r.failure = "not_shaped"
					} else if !o.optIn && r.shaped {
						r.failure = "shaped_without_opt_in"
					}
				}
				results[i] = r
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	var usage syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &usage) // this process's CPU: the client's share of the machine
	clientCPU := time.Duration(usage.Utime.Nano() + usage.Stime.Nano())

	var samples []time.Duration
	inOrder := []float64{}
	var sum time.Duration
	ok, shaped := 0, 0
	errorKinds := map[string]int{}
	for _, r := range results {
		if r.shaped {
			shaped++
		}
		if r.failure != "" {
			errorKinds[r.failure]++
			continue
		}
		ok++
		samples = append(samples, r.latency)
		inOrder = append(inOrder, ms(r.latency))
		sum += r.latency
	}
	slices.Sort(samples)
	mean := 0.0
	if len(samples) > 0 {
		mean = ms(sum / time.Duration(len(samples)))
	}
	mode := "plain"
	if o.optIn {
		mode = "opt-in"
	}
	out := map[string]any{
		"mode":          mode,
		"namespace":     o.namespace,
		"run":           run,
		"count":         o.count,
		"concurrency":   o.concurrency,
		"ok":            ok,
		"errors":        o.count - ok,
		"error_kinds":   errorKinds,
		"shaped":        shaped,
		"warnings":      warnings.n.Load(),
		"wall_s":        math.Round(wall.Seconds()*1e3) / 1e3,
		"creates_per_s": math.Round(float64(ok)/wall.Seconds()*10) / 10,
		"latency_ms": map[string]float64{
			"mean": mean, "p50": percentile(samples, 50), "p90": percentile(samples, 90),
			"p99": percentile(samples, 99), "max": percentile(samples, 100),
		},
		"latency_from":   "each Create call, client side (request encode to response decode)",
		"content_type":   map[bool]string{false: "json", true: "protobuf"}[o.protobuf],
		"scheduler_name": o.schedulerName,
		"gomaxprocs":     runtime.GOMAXPROCS(0),
		"client_cpu_s":   math.Round(clientCPU.Seconds()*1e3) / 1e3,
	}
	if e, _ := lastErr.Load().(string); e != "" {
		out["last_error"] = e
	}
	if o.cleanup {
		t0 := time.Now()
		n, err := deleteRun(ctx, client, o, run)
		c := map[string]any{"seconds": math.Round(time.Since(t0).Seconds()*1e3) / 1e3, "deleted": n}
		if err != nil {
			c["error"] = err.Error()
		}
		out["cleanup"] = c
	}
	if o.samplesFile != "" {
		data, _ := json.Marshal(inOrder)
		if err := os.WriteFile(o.samplesFile, data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "podshaper-podcreate:", err)
			os.Exit(1)
		}
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
