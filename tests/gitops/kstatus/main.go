// Command kstatus computes the kstatus status (sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute,
// the library Flux and kpt use for health checks) of Kubernetes objects.
//
// Input on stdin: one JSON object, a JSON array of objects, or a list ({"items": [...]}).
// Output on stdout: a JSON array, one entry per object in input order:
//
//	{"name": "...", "status": "InProgress|Current|Failed|Terminating|Unknown",
//	 "message": "...", "conditions": [{"type": "Reconciling|Stalled", "status": "True", "reason": "..."}]}
//
// Exit code 2 on unreadable input or a Compute error.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type result struct {
	Name       string      `json:"name"`
	Status     string      `json:"status"`
	Message    string      `json:"message"`
	Conditions []condition `json:"conditions"`
}

func objects(raw []byte) ([]map[string]interface{}, error) {
	var arr []map[string]interface{}
	if err := utiljson.Unmarshal(raw, &arr); err == nil {
		return arr, nil
	}
	var one map[string]interface{}
	if err := utiljson.Unmarshal(raw, &one); err != nil {
		return nil, err
	}
	if items, ok := one["items"].([]interface{}); ok {
		for _, it := range items {
			m, ok := it.(map[string]interface{})
			if !ok {
				return nil, fmt.Errorf("items: an entry is not an object")
			}
			arr = append(arr, m)
		}
		return arr, nil
	}
	return []map[string]interface{}{one}, nil
}

func main() {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kstatus: read stdin:", err)
		os.Exit(2)
	}
	objs, err := objects(raw)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kstatus: input is not JSON object(s):", err)
		os.Exit(2)
	}
	out := make([]result, 0, len(objs))
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o}
		res, err := status.Compute(u)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: %s: %v\n", u.GetName(), err)
			os.Exit(2)
		}
		r := result{Name: u.GetName(), Status: res.Status.String(), Message: res.Message, Conditions: []condition{}}
		for _, c := range res.Conditions {
			r.Conditions = append(r.Conditions, condition{
				Type: c.Type.String(), Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			})
		}
		out = append(out, r)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "kstatus: write:", err)
		os.Exit(2)
	}
}
