// Command table is the differential oracle for bindery's src/table: it
// renders a custom resource's Table cells exactly as kube-apiserver v1.34.10
// does for a CRD, through k8s.io/apiextensions-apiserver v0.34.10's table
// convertor (the version go.mod pins), with the object decoded as
// kube-apiserver decodes a custom resource (integers as int64, other
// numbers as float64).
//
// Input: one JSON object per line, {"columns":[{"name","type","jsonPath",
// "format","description","priority"}],"object":{...}}.
// Output: one JSON object per input line, {"ok":true,"cells":[...],
// "columns":[...]} (the row's cells and the column definitions after
// Name), or {"ok":false,"error":...} when the convertor refuses a column.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

type input struct {
	Columns []apiextensionsv1.CustomResourceColumnDefinition `json:"columns"`
	Object  json.RawMessage                                  `json:"object"`
}

type output struct {
	OK      bool                           `json:"ok"`
	Error   string                         `json:"error,omitempty"`
	Cells   []interface{}                  `json:"cells,omitempty"`
	Columns []metav1.TableColumnDefinition `json:"columns,omitempty"`
}

func answer(in input) output {
	convertor, err := tableconvertor.New(in.Columns)
	if err != nil {
		return output{Error: err.Error()}
	}
	object := map[string]interface{}{}
	if err := utiljson.Unmarshal(in.Object, &object); err != nil {
		return output{Error: "object: " + err.Error()}
	}
	table, err := convertor.ConvertToTable(context.Background(), &unstructured.Unstructured{Object: object}, nil)
	if err != nil {
		return output{Error: err.Error()}
	}
	if len(table.Rows) != 1 {
		return output{Error: fmt.Sprintf("%d rows", len(table.Rows))}
	}
	return output{OK: true, Cells: table.Rows[0].Cells, Columns: table.ColumnDefinitions[1:]}
}

func main() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	out := json.NewEncoder(os.Stdout)
	for scanner.Scan() {
		var in input
		if err := json.Unmarshal(scanner.Bytes(), &in); err != nil {
			fmt.Fprintln(os.Stderr, "table oracle: bad input:", err)
			os.Exit(2)
		}
		if err := out.Encode(answer(in)); err != nil {
			fmt.Fprintln(os.Stderr, "table oracle:", err)
			os.Exit(2)
		}
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "table oracle:", err)
		os.Exit(2)
	}
}
