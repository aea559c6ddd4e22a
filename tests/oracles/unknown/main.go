// Command unknown is the differential oracle for bindery's src/wire/gogo.rs:
// it reads protobuf envelopes (the bytes after the "k8s\x00" magic) with
// runtime.Unknown's gogo-generated Unmarshal from k8s.io/apimachinery
// v0.34.10 (the version go.mod pins), as kube-apiserver's protobuf
// serializer does.
//
// Input: one hex string per line. Output: one JSON object per line,
// {"ok":true,"apiVersion":...,"kind":...} or {"ok":false,"error":...}.
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
)

type output struct {
	OK         bool   `json:"ok"`
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Error      string `json:"error,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		data, err := hex.DecodeString(in.Text())
		if err != nil {
			panic(err)
		}
		var unknown runtime.Unknown
		var answer output
		if err := unknown.Unmarshal(data); err != nil {
			answer = output{Error: err.Error()}
		} else {
			answer = output{OK: true, APIVersion: unknown.APIVersion, Kind: unknown.Kind}
		}
		if err := out.Encode(answer); err != nil {
			panic(err)
		}
	}
	if err := in.Err(); err != nil {
		panic(err)
	}
}
