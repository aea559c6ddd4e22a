// Command jsonpatch is the differential oracle for bindery's src/wire/patch.rs:
// it applies JSON patches and JSON merge patches exactly as kube-apiserver
// v1.34.10 does (k8s.io/apiserver/pkg/endpoints/handlers/patch.go,
// applyJSPatch), with gopkg.in/evanphx/json-patch.v4 v4.12.0 and the package
// globals kube-apiserver sets.
//
// Input: one JSON object per line, {"kind":"json"|"merge","doc":...,"patch":...}.
// Output: one JSON object per input line, {"ok":true,"result":<doc>} or
// {"ok":false,...} with what failed: "stage" ("doc", "decode", "apply" or
// "merge"), "panic":true where the library panicked (kube-apiserver answers
// 500 for those), "error" with Go's message.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

type input struct {
	Kind  string          `json:"kind"`
	Doc   json.RawMessage `json:"doc"`
	Patch json.RawMessage `json:"patch"`
}

type failure struct {
	OK    bool   `json:"ok"`
	Stage string `json:"stage"`
	Panic bool   `json:"panic,omitempty"`
	Error string `json:"error"`
}

// kubeJSON is the document as kube-apiserver hands it to the library: the
// stored object decoded (integers that fit an int64 stay int64, other
// numbers become float64) and encoded again by encoding/json.
func kubeJSON(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v interface{}
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	v, err := convertNumbers(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func convertNumbers(v interface{}) (interface{}, error) {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i, nil
		}
		return t.Float64()
	case map[string]interface{}:
		for k, e := range t {
			c, err := convertNumbers(e)
			if err != nil {
				return nil, err
			}
			t[k] = c
		}
	case []interface{}:
		for i, e := range t {
			c, err := convertNumbers(e)
			if err != nil {
				return nil, err
			}
			t[i] = c
		}
	}
	return v, nil
}

func apply(in input) (out []byte, fail *failure) {
	stage := "doc"
	defer func() {
		if r := recover(); r != nil {
			out, fail = nil, &failure{Stage: stage, Panic: true, Error: fmt.Sprint(r)}
		}
	}()
	doc, err := kubeJSON(in.Doc)
	if err != nil {
		return nil, &failure{Stage: stage, Error: err.Error()}
	}
	switch in.Kind {
	case "json":
		stage = "decode"
		patch, err := jsonpatch.DecodePatch(in.Patch)
		if err != nil {
			return nil, &failure{Stage: stage, Error: err.Error()}
		}
		stage = "apply"
		result, err := patch.Apply(doc)
		if err != nil {
			return nil, &failure{Stage: stage, Error: err.Error()}
		}
		return result, nil
	case "merge":
		stage = "merge"
		result, err := jsonpatch.MergePatch(doc, in.Patch)
		if err != nil {
			return nil, &failure{Stage: stage, Error: err.Error()}
		}
		return result, nil
	default:
		return nil, &failure{Stage: "input", Error: "unknown kind " + in.Kind}
	}
}

func main() {
	// As k8s.io/apiserver/pkg/server/config.go leaves them.
	jsonpatch.SupportNegativeIndices = true
	jsonpatch.AccumulatedCopySizeLimit = 3 * 1024 * 1024

	dec := json.NewDecoder(bufio.NewReaderSize(os.Stdin, 1<<20))
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	for {
		var in input
		if err := dec.Decode(&in); err == io.EOF {
			return
		} else if err != nil {
			fmt.Fprintln(os.Stderr, "oracle: bad input:", err)
			w.Flush()
			os.Exit(2)
		}
		result, fail := apply(in)
		if fail != nil {
			line, _ := json.Marshal(fail)
			w.Write(line)
		} else {
			w.WriteString(`{"ok":true,"result":`)
			w.Write(result)
			w.WriteString(`}`)
		}
		w.WriteString("\n")
	}
}
