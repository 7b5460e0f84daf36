//go:build tools

// helm's main package, so `go mod tidy` keeps what it needs.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
