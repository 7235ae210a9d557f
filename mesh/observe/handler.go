package observe

import (
	"context"
	_ "embed"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/feedmesh/feedmesh/mesh"
)

// Options configure the handler.
type Options struct {
	// RequestTimeout bounds each request a status snapshot makes to other
	// nodes (the jobs from the leader, per-op statistics from each
	// worker); default 2 s.
	RequestTimeout time.Duration
	// MaxConcurrentSnapshots bounds the /status.json requests served at
	// once (each may ask every worker); more get 503. Default 4.
	MaxConcurrentSnapshots int
	// MaxWorkerRequests bounds the requests to workers in flight at once,
	// over every snapshot being served. Default 32.
	MaxWorkerRequests int

	workerSlots chan struct{}
}

func (o Options) withDefaults() Options {
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 2 * time.Second
	}
	if o.MaxConcurrentSnapshots <= 0 {
		o.MaxConcurrentSnapshots = 4
	}
	if o.MaxWorkerRequests <= 0 {
		o.MaxWorkerRequests = 32
	}
	o.workerSlots = make(chan struct{}, o.MaxWorkerRequests)
	return o
}

//go:embed page.html
var page []byte

// NewHandler serves n's metrics on /metrics (Prometheus text exposition,
// with the Go runtime's and the process's own collectors), the snapshot on
// /status.json, the status page on /, and the health endpoints /livez and
// /readyz (health.go). /status.json shows the jobs of the principal an
// access token in the Authorization header proves (its tenant's; an
// administrator's: all); without a token, on a node under mutual TLS it
// answers 401, in dev mode it shows every job.
func NewHandler(n *mesh.Node, o Options) http.Handler {
	o = o.withDefaults()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{n: n}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	slots := make(chan struct{}, o.MaxConcurrentSnapshots)
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		default:
			http.Error(w, "too many status requests at once; try again", http.StatusServiceUnavailable)
			return
		}
		p, err := n.HTTPPrincipal(bearer(r))
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="feedmesh"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 4*o.RequestTimeout)
		defer cancel()
		s := snapshot(ctx, n, p, o)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(s)
	})
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) { writeLive(w) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { writeReadiness(w, r, n.Readiness()) })
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	})
	return mux
}

// bearer is the token of r's "Authorization: Bearer" header, or "".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}
