// Command fluxcel evaluates Flux Kustomization healthCheckExprs (CEL) against objects with Flux's
// own evaluator, github.com/fluxcd/pkg/runtime/cel.StatusEvaluator (the code kustomize-controller
// runs for spec.healthCheckExprs).
//
// Input on stdin (JSON):
//
//	{"exprs": {"current": "...", "inProgress": "...", "failed": "..."}, "objects": [{...}, ...]}
//
// Output on stdout: a JSON array, one entry per object in input order:
//
//	{"name": "...", "status": "InProgress|Current|Failed", "error": ""}
//
// An evaluation error (e.g. a field the expression reads is absent) is reported in "error" with
// an empty status: kustomize-controller then keeps waiting until spec.timeout. Exit code 2 when
// the input is unreadable or an expression does not parse.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/runtime/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

type input struct {
	Exprs   kustomize.HealthCheckExpressions `json:"exprs"`
	Objects []map[string]interface{}         `json:"objects"`
}

type result struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Error  string `json:"error"`
}

func main() {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fluxcel: read stdin:", err)
		os.Exit(2)
	}
	var in input
	if err := utiljson.Unmarshal(raw, &in); err != nil {
		fmt.Fprintln(os.Stderr, "fluxcel: input:", err)
		os.Exit(2)
	}
	ev, err := cel.NewStatusEvaluator(&in.Exprs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fluxcel:", err)
		os.Exit(2)
	}
	out := make([]result, 0, len(in.Objects))
	for _, o := range in.Objects {
		u := &unstructured.Unstructured{Object: o}
		r := result{Name: u.GetName()}
		res, err := ev.Evaluate(context.Background(), u)
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Status = res.Status.String()
		}
		out = append(out, r)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "fluxcel: write:", err)
		os.Exit(2)
	}
}
