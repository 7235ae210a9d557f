package dataaccess

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/client"
	"github.com/feedmesh/feedmesh/pipeline"
	"github.com/feedmesh/feedmesh/transport"
)

// secret returns a marker no legitimate read can produce: a secret file
// holds it, and a test fails if it ever arrives at the client.
func secret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	rand.Read(b)
	return "SECRET-" + hex.EncodeToString(b)
}

var jobSeq atomic.Int64

// attempt distributes spec under a new job name (the nodes run the whole
// pipeline) and reads it to its end within 30 s: the bytes of every tensor
// it delivered, concatenated, and the first error.
func attempt(t *testing.T, cl *client.Client, spec *pipeline.Spec) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("job-%d", jobSeq.Add(1))
	it, err := cl.Distribute(ctx, spec, client.JobOptions{Name: name, Sharding: client.Dynamic, Offload: client.OffloadRemote, Workers: client.AllWorkers})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var got bytes.Buffer
	for {
		b, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return got.Bytes(), nil
		}
		if err != nil {
			return got.Bytes(), err
		}
		for _, x := range b.Tensors {
			got.Write(x.Data)
		}
		b.Release()
	}
}

// refusals collects the answers to attacks, to check that they are one
// generic answer: permission_denied, "not allowed", naming nothing but
// what the spec named.
type refusals struct {
	t *testing.T
	// forms maps each answer, with the name the spec gave replaced by
	// NAME, to the attacks that got it.
	forms map[string][]string
	// leaks are strings no answer may contain (the outside directory,
	// words of the node's log).
	leaks []string
}

func newRefusals(t *testing.T, leaks ...string) *refusals {
	return &refusals{t: t, forms: map[string][]string{}, leaks: append(leaks,
		"no such file", "escapes", "symlink", "permission denied", "loopback", "redirect", "resolves", "private", "root")}
}

// refused checks one attack's outcome: no secret delivered, and a
// permission_denied answer that says "not allowed" about name, the path or
// URL as the spec gave it, and nothing else.
func (r *refusals) refused(what, name, secret string, got []byte, err error) {
	r.t.Helper()
	r.check(what, name, secret, got, err, true)
}

// failed is refused for a job that failed on a worker: its failure is
// text recorded in the job, without the transport's code.
func (r *refusals) failed(what, name, secret string, got []byte, err error) {
	r.t.Helper()
	r.check(what, name, secret, got, err, false)
}

func (r *refusals) check(what, name, secret string, got []byte, err error, code bool) {
	t := r.t
	t.Helper()
	if secret != "" && (bytes.Contains(got, []byte(secret)) || (err != nil && strings.Contains(err.Error(), secret))) {
		t.Errorf("%s: the secret arrived at the client (err %v)", what, err)
		return
	}
	if err == nil {
		t.Errorf("%s: read %d bytes and no error, want not allowed", what, len(got))
		return
	}
	answer := fmt.Sprintf("%q: not allowed", name)
	if code && !errors.Is(err, transport.ErrPermissionDenied) || !strings.Contains(err.Error(), answer) {
		t.Errorf("%s: %v\nwant permission_denied, %s", what, err, answer)
		return
	}
	msg := strings.ReplaceAll(err.Error(), fmt.Sprintf("%q", name), "NAME")
	for _, l := range r.leaks {
		if l != "" && strings.Contains(msg, l) {
			t.Errorf("%s: the answer reveals %q: %v", what, l, err)
		}
	}
	// The answer after the field that named it (paths[0], a tokenizer
	// arg) is the same whatever the attack.
	form := msg[strings.Index(msg, "NAME: not allowed"):]
	r.forms[form] = append(r.forms[form], what)
}

// oneForm checks that the attacks got one answer.
func (r *refusals) oneForm() {
	r.t.Helper()
	if len(r.forms) > 1 {
		for f, whats := range r.forms {
			r.t.Logf("%q: %v", f, whats)
		}
		r.t.Errorf("the refusals have %d forms, want one generic answer", len(r.forms))
	}
	for f := range r.forms {
		r.t.Logf("answer: %s", f)
	}
}
