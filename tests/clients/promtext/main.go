// Command promtext reads a Prometheus text-format (0.0.4) exposition on
// stdin with the Prometheus project's own parser (prometheus/common's
// expfmt.TextParser, which Prometheus's client libraries and tools use) and
// prints what it parsed as one JSON object: family name -> type and samples.
// A text it cannot parse makes it exit 1 with the parser's error.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

type sample struct {
	Labels map[string]string `json:"labels"`
	// Value is the counter's, gauge's or untyped value, or a histogram's
	// sample count.
	Value float64 `json:"value"`
	// Sum is a histogram's sum of observations.
	Sum float64 `json:"sum,omitempty"`
}

type family struct {
	Type    string   `json:"type"`
	Help    string   `json:"help"`
	Samples []sample `json:"samples"`
}

func main() {
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promtext:", err)
		os.Exit(1)
	}
	out := map[string]family{}
	for name, mf := range families {
		f := family{Type: mf.GetType().String(), Help: mf.GetHelp()}
		for _, m := range mf.GetMetric() {
			s := sample{Labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s.Value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s.Value = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				s.Value = float64(m.GetHistogram().GetSampleCount())
				s.Sum = m.GetHistogram().GetSampleSum()
			default:
				s.Value = m.GetUntyped().GetValue()
			}
			f.Samples = append(f.Samples, s)
		}
		out[name] = f
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "promtext:", err)
		os.Exit(1)
	}
}
