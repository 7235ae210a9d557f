package observe

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/feedmesh/feedmesh/mesh"
)

// The health endpoints, for Kubernetes' probes and load balancers:
//
//   - /livez answers 200 while the process serves HTTP at all: a
//     livenessProbe restarts a wedged process, never one that is only
//     waiting for its peers.
//   - /readyz answers 200 when the node is ready for work
//     (mesh.Node.Readiness: joined, Raft leader known, caught up, not
//     draining) and 503 otherwise; the body lists each check, as text, or
//     as JSON with ?format=json (or Accept: application/json). A node
//     answers 503 from the moment it gets SIGTERM: it drains, and the
//     client Service stops sending it new clients.

func writeLive(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprintln(w, "ok")
}

func writeReadiness(w http.ResponseWriter, r *http.Request, rd mesh.Readiness) {
	w.Header().Set("Cache-Control", "no-store")
	code := http.StatusOK
	if !rd.Ready {
		code = http.StatusServiceUnavailable
	}
	if r.URL.Query().Get("format") == "json" || r.Header.Get("Accept") == "application/json" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(rd)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	for _, c := range rd.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "[%s] %s: %s\n", mark, c.Name, c.Detail)
	}
	if rd.Ready {
		fmt.Fprintln(w, "ready")
	} else {
		fmt.Fprintln(w, "not ready")
	}
}
