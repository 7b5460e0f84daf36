// peer-webhook is the benchmark peer of podshaper-webhook: the same pod mutation
// written the way a team would write it with controller-runtime — a CustomDefaulter
// for core/v1 Pods served by controller-runtime's webhook server, which answers with
// the JSON Patch between the request's object and the defaulted one.
//
//	peer-webhook serve --listen HOST:PORT --tls-cert FILE --tls-key FILE [--config FILE]
//	peer-webhook version
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

const version = "0.1.0"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "serve":
		os.Exit(serve(os.Args[2:]))
	case "version":
		fmt.Println("peer-webhook", version)
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: peer-webhook serve --listen HOST:PORT --tls-cert FILE --tls-key FILE [--config FILE]\n       peer-webhook version")
	os.Exit(2)
}

func serve(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", "", "HOST:PORT to serve HTTPS on")
	certFile := fs.String("tls-cert", "", "serving certificate (PEM); reloaded when it changes")
	keyFile := fs.String("tls-key", "", "its private key (PEM)")
	configFile := fs.String("config", "", "podshaper webhook config (YAML)")
	enableHTTP2 := fs.Bool("enable-http2", false, "serve HTTP/2 too (off, as kubebuilder scaffolds it since CVE-2023-44487)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "peer-webhook serve: "+format+"\n", a...)
		return 2
	}
	if *listen == "" || *certFile == "" || *keyFile == "" {
		return fail("--listen, --tls-cert and --tls-key are required")
	}
	host, portText, err := net.SplitHostPort(*listen)
	if err != nil {
		return fail("--listen %q: %v", *listen, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return fail("--listen %q: bad port", *listen)
	}
	cfg, err := LoadConfig(*configFile)
	if err != nil {
		return fail("%v", err)
	}

	ctrl.SetLogger(zap.New())
	log := ctrl.Log.WithName("peer-webhook")

	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return fail("%v", err)
	}

	certWatcher, err := certwatcher.New(*certFile, *keyFile)
	if err != nil {
		return fail("%v", err)
	}
	tlsOpts := []func(*tls.Config){
		func(c *tls.Config) {
			c.MinVersion = tls.VersionTLS12
			c.GetCertificate = certWatcher.GetCertificate
		},
	}
	if !*enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	server := webhook.NewServer(webhook.Options{Host: host, Port: port, TLSOpts: tlsOpts})
	shaper := &PodShaper{Config: cfg, ShapedBy: "peer-webhook/" + version + " config=" + cfg.Hash()}
	server.Register("/mutate-v1-pod", admission.WithCustomDefaulter(scheme, &corev1.Pod{}, shaper))
	server.WebhookMux().HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})

	ctx := ctrl.SetupSignalHandler()
	go func() {
		if err := certWatcher.Start(ctx); err != nil {
			log.Error(err, "certificate watcher")
		}
	}()
	log.Info("serving", "listen", *listen, "config", cfg.Hash())
	if err := server.Start(ctx); err != nil {
		return fail("%v", err)
	}
	return 0
}
