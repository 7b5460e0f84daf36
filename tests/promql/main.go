// promql-check FILE...: each rule of a Prometheus rule list (charts/podshaper/alerts.yaml)
// parses as PromQL, with Prometheus' own parser at the release pinned in go.mod.
package main

import (
	"fmt"
	"os"

	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

type rule struct {
	Alert  string `yaml:"alert"`
	Record string `yaml:"record"`
	Expr   string `yaml:"expr"`
}

func main() {
	p := parser.NewParser(parser.Options{})
	failed := 0
	for _, path := range os.Args[1:] {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		var rules []rule
		if err := yaml.Unmarshal(data, &rules); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(2)
		}
		for _, r := range rules {
			if _, err := p.ParseExpr(r.Expr); err != nil {
				fmt.Printf("FAIL: %s %s: %v\n", path, r.Alert+r.Record, err)
				failed++
			} else {
				fmt.Printf("ok: %s %s\n", path, r.Alert+r.Record)
			}
		}
	}
	if failed > 0 {
		os.Exit(1)
	}
}
