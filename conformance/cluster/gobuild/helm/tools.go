//go:build tools

// Package tools only exists so that `go mod tidy` keeps the package whose
// binary conformance/cluster/build.sh builds: helm, for the chart's lint and
// template checks.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
