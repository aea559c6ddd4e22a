// Command selectors is the differential oracle for bindery's
// src/wire/selector.rs: it reads label and field selectors exactly as
// kube-apiserver v1.34.10 does, through k8s.io/apimachinery v0.34.10 (the
// version go.mod pins): the query decoded into ListOptions by the
// ParameterCodec kube-apiserver's handlers use (which calls
// metav1.Convert_string_To_labels_Selector and
// Convert_string_To_fields_Selector), and an error answered as
// errors.NewBadRequest(err.Error()).
//
// Input: one JSON object per line,
// {"kind":"label"|"field","text":...,"labels":{...}}.
// Output: one JSON object per input line, {"ok":true,"string":<the
// selector's String()>,"matches":<whether it matches labels, as a
// labels.Set or a fields.Set>} or {"ok":false,"error":<the 400's message>,
// "code":400,"reason":"BadRequest"}.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

type input struct {
	Kind   string            `json:"kind"`
	Text   string            `json:"text"`
	Labels map[string]string `json:"labels"`
}

type output struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
	Code    int32  `json:"code,omitempty"`
	Reason  string `json:"reason,omitempty"`
	String  string `json:"string"`
	Matches bool   `json:"matches"`
}

func answer(in input) output {
	parameter := map[string]string{"label": "labelSelector", "field": "fieldSelector"}[in.Kind]
	if parameter == "" {
		return output{Error: fmt.Sprintf("oracle: unknown kind %q", in.Kind)}
	}
	// As kube-apiserver's list handler reads the query (handlers/get.go).
	var opts internalversion.ListOptions
	query := url.Values{parameter: {in.Text}}
	if err := scheme.ParameterCodec.DecodeParameters(query, metav1.SchemeGroupVersion, &opts); err != nil {
		status := apierrors.NewBadRequest(err.Error()).ErrStatus
		return output{Error: status.Message, Code: status.Code, Reason: string(status.Reason)}
	}
	if in.Kind == "label" {
		selector := opts.LabelSelector
		if selector == nil {
			selector = labels.Everything()
		}
		return output{OK: true, String: selector.String(), Matches: selector.Matches(labels.Set(in.Labels))}
	}
	selector := opts.FieldSelector
	if selector == nil {
		selector = fields.Everything()
	}
	return output{OK: true, String: selector.String(), Matches: selector.Matches(fields.Set(in.Labels))}
}

func main() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<26)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	encoder := json.NewEncoder(out)
	for scanner.Scan() {
		var in input
		if err := json.Unmarshal(scanner.Bytes(), &in); err != nil {
			fmt.Fprintf(os.Stderr, "selectors oracle: bad input line: %v\n", err)
			os.Exit(2)
		}
		if err := encoder.Encode(answer(in)); err != nil {
			fmt.Fprintf(os.Stderr, "selectors oracle: %v\n", err)
			os.Exit(2)
		}
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "selectors oracle: %v\n", err)
		os.Exit(2)
	}
}
