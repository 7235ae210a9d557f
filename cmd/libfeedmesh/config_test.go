package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/transport"
)

func TestClientOptions(t *testing.T) {
	o, timeout, err := clientOptions("127.0.0.1:7947", `{"window": 8, "prefetch_batches": 32, "heartbeat_interval": 0.25, "resume_wait": 30, "unavailable_timeout": 5, "transport": "fast", "dial_timeout": 3, "log_level": "off"}`)
	if err != nil {
		t.Fatal(err)
	}
	if o.Window != 8 || o.PrefetchBatches != 32 || o.HeartbeatInterval != 250*time.Millisecond || o.ResumeWait != 30*time.Second || o.UnavailableTimeout != 5*time.Second || timeout != 3*time.Second {
		t.Errorf("options %+v, timeout %v", o, timeout)
	}
	if o.Transport == nil || o.Transport.MaxIdleTimeout != transport.FastConfig().MaxIdleTimeout {
		t.Errorf("transport fast: got %+v", o.Transport)
	}
	if _, timeout, err := clientOptions("h:1", ""); err != nil || timeout != 10*time.Second {
		t.Errorf("no options: timeout %v, %v", timeout, err)
	}
	for _, tc := range []struct{ addr, opts, want string }{
		{"nohost", "", "host:port"},
		{"h:1", `{"windw": 3}`, `unknown field "windw"`},
		{"h:1", `{"transport": "warp"}`, "transport"},
		{"h:1", `{"log_level": "loud"}`, "log_level"},
		{"h:1", `{"tls_cert": "/x.pem"}`, "both"},
		{"h:1", `{} {}`, "more than one"},
	} {
		_, _, err := clientOptions(tc.addr, tc.opts)
		if !errors.Is(err, errArg) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("clientOptions(%q, %q) = %v, want an invalid argument naming %q", tc.addr, tc.opts, err, tc.want)
		}
	}
}

func TestJobOptions(t *testing.T) {
	n, err := jobOptions(`{"name": "j", "sharding": "dynamic", "epochs": 3, "consumer_ttl": 5000000000, "share": true}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := n.Job(); n.Name() != "j" || o.Sharding() != client.Dynamic || o.Epochs() != 3 || o.ConsumerTTL() != 5*time.Second || !o.Share() || o.Delivery() != client.AtMostOnce {
		t.Errorf("got %+v", o.Options())
	}
	for text, want := range map[string]client.Workers{`"workers": 3`: "3", `"workers": "all"`: client.AllWorkers, `"workers": "auto"`: client.AutoWorkers} {
		if n, err := jobOptions(`{"name": "j", "sharding": "dynamic", `+text+`}`, nil); err != nil || n.Job().Workers() != want {
			t.Errorf("%s: %+v, %v", text, n.Job().Options(), err)
		}
	}
	if n, err := jobOptions(`{"name": "j", "sharding": "dynamic"}`, []byte("ck")); err != nil || string(n.Consumer().Resume()) != "ck" {
		t.Errorf("resume: %+v, %v", n.Consumer(), err)
	}
	for _, tc := range []struct{ opts, want string }{
		{`{"sharding": "dynamic"}`, "Name is required"},
		{`{"name": "j", "sharding": "sideways"}`, "sharding"},
		{`{"name": "j", "shard": "off"}`, `unknown field "shard"`},
		{`{"name": "j", "coordinated": true, "num_consumers": 2, "consumer_index": 2}`, "ConsumerIndex"},
		{`{"name": "j", "coordinated": true, "num_consumers": 2, "workers": "auto"}`, "workers auto with coordinated on: coordinated reads do not autoscale"},
		{`{"name": "j", "sharding": "dynamic", "workers": 0}`, `workers "0"`},
		{`{"name": "j", "sharding": "dynamic", "workers": true}`, "workers true"},
		{`{"name": "j", "compression": "brotli"}`, "compression"}, // a name this client does not have
	} {
		_, err := jobOptions(tc.opts, nil)
		if !errors.Is(err, errArg) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("jobOptions(%s) = %v, want an invalid argument naming %q", tc.opts, err, tc.want)
		}
	}
	if _, err := jobOptions(`{"name": "j", "sharding": "off"}`, []byte("ck")); !errors.Is(err, errArg) {
		t.Errorf("resume of an OFF job: %v, want an invalid argument", err)
	}
}

func TestParseSpec(t *testing.T) {
	yaml := "source:\n  range: {stop: 10}\nops:\n  - batch: {size: 5}\n"
	json := `{"source": {"range": {"stop": 10}}, "ops": [{"batch": {"size": 5}}]}`
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	var fps []string
	for _, tc := range []struct {
		kind int
		spec string
	}{{specText, yaml}, {specText, json}, {specPath, path}} {
		s, err := parseSpec(tc.kind, []byte(tc.spec))
		if err != nil {
			t.Fatalf("parseSpec(%d, %q): %v", tc.kind, tc.spec, err)
		}
		fp, err := s.Fingerprint()
		if err != nil {
			t.Fatal(err)
		}
		fps = append(fps, fp)
	}
	if fps[0] != fps[1] || fps[1] != fps[2] {
		t.Errorf("YAML, JSON and file give different datasets: %v", fps)
	}
	for _, tc := range []struct {
		kind      int
		spec, msg string
	}{
		{specText, "source:\n  range: {stop: 10, bogus: 1}\n", "bogus"},
		{specText, "{not json", "invalid"},
		{specText, "", "empty"},
		{specPath, filepath.Join(t.TempDir(), "none.yaml"), "none.yaml"},
	} {
		_, err := parseSpec(tc.kind, []byte(tc.spec))
		if !errors.Is(err, errSpec) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("parseSpec(%d, %q) = %v, want an invalid spec naming %q", tc.kind, tc.spec, err, tc.msg)
		}
	}
	if _, err := parseSpec(7, []byte(yaml)); !errors.Is(err, errArg) {
		t.Errorf("unknown spec kind: %v", err)
	}
}

func TestHandles(t *testing.T) {
	h := &handles{m: map[uint64]any{}}
	x := &batchObj{}
	a, b := h.put(x), h.put("x")
	if a == b || a == 0 || b == 0 {
		t.Fatalf("handles %d, %d", a, b)
	}
	if taken[iterObj](h, a) != nil || h.get(a) != x {
		t.Error("taking a batch's handle as an iterator's took it")
	}
	if h.get(a) != x || taken[batchObj](h, a) != x || taken[batchObj](h, a) != nil || h.get(a) != nil {
		t.Error("a handle resolves until taken, and only once")
	}
	if n := h.count(func(v any) bool { _, ok := v.(string); return ok }); n != 1 {
		t.Errorf("count = %d", n)
	}
	if _, err := typed[iterObj](12345, "iterator"); !errors.Is(err, errClosed) {
		t.Errorf("an unknown handle: %v, want closed", err)
	}
}
