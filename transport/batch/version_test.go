package batch

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/internal/testutil"
	"github.com/feedmesh/feedmesh/transport"
)

// A current client and worker agree on ProtocolVersion, and batches flow.
func TestVersionAgreed(t *testing.T) {
	p := newPair(t, transport.FastConfig())
	ctx := testutil.Ctx(t, 5*time.Second)
	snd, rcv := p.stream(t, OpenRequest{Job: "j", Window: 2}, 4, Limits{})
	if snd.Version() != ProtocolVersion {
		t.Fatalf("worker: version %d, want %d", snd.Version(), ProtocolVersion)
	}
	go func() {
		if snd.Send(ctx, encode(t, p.worker.Codec, 0, numbered(t, 0, 10))) == nil {
			snd.End(nil)
		}
	}()
	h, e, err := rcv.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkBatch(t, h, e, 0, 10)
	if rcv.Version() != ProtocolVersion {
		t.Fatalf("client: version %d, want %d", rcv.Version(), ProtocolVersion)
	}
	if _, _, err := rcv.Next(ctx); err != io.EOF {
		t.Fatalf("after the last batch: %v, want io.EOF", err)
	}
}

// A worker refuses an Open of a version it does not speak (none, too old,
// too new): Accept returns a *VersionError, and the client reads an End
// that says so, names both versions and what to upgrade, and then the end of
// the stream.
func TestWorkerRefusesUnspokenVersion(t *testing.T) {
	cases := []struct {
		name    string
		version uint16
		advice  string
	}{
		{"none", 0, "upgrade the client"},
		{"too new", ProtocolVersion + 1, "upgrade the node"},
		{"far too new", 0xffff, "upgrade the node"},
	}
	if MinProtocolVersion > 1 {
		cases = append(cases, struct {
			name    string
			version uint16
			advice  string
		}{"too old", MinProtocolVersion - 1, "upgrade the client"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, transport.FastConfig())
			ctx := testutil.Ctx(t, 5*time.Second)
			s, err := p.client.T.Dial(ctx, p.worker.Addr(), transport.KindData)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := p.client.Codec.WriteFrame(s, &wireMsg{Kind: kindOpen, Version: tc.version, Job: "j", Window: 2}); err != nil {
				t.Fatal(err)
			}
			c, err := p.worker.T.Listener(transport.KindData).Accept()
			if err != nil {
				t.Fatal(err)
			}
			snd, _, err := Accept(ctx, p.worker.Codec, c, 4)
			if snd != nil {
				snd.Close()
			}
			var verr *VersionError
			if !errors.Is(err, ErrUnsupportedVersion) || !errors.As(err, &verr) || verr.Client != tc.version || verr.Min != MinProtocolVersion || verr.Max != ProtocolVersion {
				t.Fatalf("Accept: %v (%+v), want a *VersionError for v%d", err, verr, tc.version)
			}
			checkVersionText(t, err.Error(), tc.version, tc.advice)

			s.SetReadDeadline(time.Now().Add(3 * time.Second)) // a hang fails the test
			var m wireMsg
			if _, err := readMsg(p.client.Codec, s, &m, Limits{}, bufs{}); err != nil || m.Kind != kindEnd || !m.Failed || m.Version != ProtocolVersion || m.MinVersion != MinProtocolVersion {
				t.Fatalf("client got %+v, %v; want an End refusing the version", m, err)
			}
			checkVersionText(t, m.Error, tc.version, tc.advice)
			if _, err := readMsg(p.client.Codec, s, &wireMsg{}, Limits{}, bufs{}); err != io.EOF {
				t.Fatalf("after the refusal: %v, want the end of the stream", err)
			}
		})
	}
}

// checkVersionText checks that a refusal's text names the client's
// version, the worker's and what to upgrade.
func checkVersionText(t *testing.T, text string, client uint16, advice string) {
	t.Helper()
	want := []string{fmt.Sprintf("v%d to v%d", MinProtocolVersion, ProtocolVersion), advice}
	if client != 0 {
		want = append(want, fmt.Sprintf("asked for v%d", client))
	} else {
		want = append(want, "asked for no version")
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Fatalf("refusal %q does not say %q", text, w)
		}
	}
}

// fakeWorker accepts the next batch stream on p's worker, checks the Open,
// writes msgs and closes the stream.
func fakeWorker(t *testing.T, p *pair, msgs ...wireMsg) {
	t.Helper()
	c, err := p.worker.T.Listener(transport.KindData).Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var open wireMsg
	if _, err := readMsg(p.worker.Codec, c, &open, Limits{}, bufs{}); err != nil || open.Kind != kindOpen || open.Version != ProtocolVersion {
		t.Fatalf("open: %+v, %v; want an Open of v%d", open, err, ProtocolVersion)
	}
	for i := range msgs {
		if err := p.worker.Codec.WriteFrame(c, &msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
}

// A Receiver maps a worker's refusal of its version to a *VersionError
// (the worker's range, its own version, what to upgrade), returned again
// by every later Next; so is an answer without an Accept (a batch or a
// clean End first), which is how a worker from before protocol versions
// answers: upgrade the node, rather than a malformed stream that a client
// retries for ever. A refusal that contradicts itself or comes after the
// Accept breaks the stream as malformed.
func TestReceiverReportsRefusal(t *testing.T) {
	accept := wireMsg{Kind: kindAccept, Version: ProtocolVersion, Window: 2, MaxWindow: 4}
	for _, tc := range []struct {
		name   string
		msgs   []wireMsg
		min    uint16 // of the *VersionError; 0: want ErrMalformedBatch
		max    uint16
		advice string
		// predates: want the *VersionError of a worker from before
		// protocol versions (Min and Max 0).
		predates bool
	}{
		{"worker newer", []wireMsg{{Kind: kindEnd, Failed: true, Error: "no", Version: ProtocolVersion + 3, MinVersion: ProtocolVersion + 1}},
			ProtocolVersion + 1, ProtocolVersion + 3, "upgrade the client", false},
		{"refusal of a version spoken", []wireMsg{{Kind: kindEnd, Failed: true, Version: ProtocolVersion, MinVersion: MinProtocolVersion}}, 0, 0, "", false},
		{"refusal not failed", []wireMsg{{Kind: kindEnd, Version: ProtocolVersion + 1, MinVersion: ProtocolVersion + 1}}, 0, 0, "", false},
		{"refusal without min", []wireMsg{{Kind: kindEnd, Failed: true, Version: ProtocolVersion + 1}}, 0, 0, "", false},
		{"refusal after accept", []wireMsg{accept, {Kind: kindEnd, Failed: true, Version: ProtocolVersion + 1, MinVersion: ProtocolVersion + 1}}, 0, 0, "", false},
		{"batch before accept", []wireMsg{{Kind: kindBatch, Seq: 1}}, 0, 0, "upgrade the node", true},
		{"clean end before accept", []wireMsg{{Kind: kindEnd}}, 0, 0, "upgrade the node", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, transport.FastConfig())
			ctx := testutil.Ctx(t, 5*time.Second)
			rcv, err := Open(ctx, p.client.T, p.client.Codec, p.worker.Addr(), OpenRequest{Job: "j", Window: 2}, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			defer rcv.Close()
			fakeWorker(t, p, tc.msgs...)
			_, _, err = rcv.Next(ctx)
			if tc.predates {
				var verr *VersionError
				if !errors.As(err, &verr) || *verr != (VersionError{Client: ProtocolVersion}) || !strings.Contains(err.Error(), "predates protocol versions") ||
					!strings.Contains(err.Error(), tc.advice) || !strings.Contains(err.Error(), p.worker.Addr()) {
					t.Fatalf("Next: %v, want the *VersionError of a worker from before versions, naming it and saying %q", err, tc.advice)
				}
				return
			}
			if tc.min == 0 {
				if !errors.Is(err, ErrMalformedBatch) || errors.Is(err, ErrUnsupportedVersion) {
					t.Fatalf("Next: %v, want ErrMalformedBatch", err)
				}
				return
			}
			var verr *VersionError
			if !errors.As(err, &verr) || *verr != (VersionError{Client: ProtocolVersion, Min: tc.min, Max: tc.max}) {
				t.Fatalf("Next: %v, want a *VersionError for v%d against v%d to v%d", err, ProtocolVersion, tc.min, tc.max)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.advice) || !strings.Contains(msg, fmt.Sprintf("v%d to v%d", tc.min, tc.max)) || !strings.Contains(msg, p.worker.Addr()) {
				t.Fatalf("Next: %q does not name the worker, its versions and %q", msg, tc.advice)
			}
			if _, _, again := rcv.Next(ctx); again != err {
				t.Fatalf("Next again: %v, want the same error", again)
			}
		})
	}
}

// VersionError says which end to upgrade.
func TestVersionErrorText(t *testing.T) {
	for _, tc := range []struct {
		e    VersionError
		want string
	}{
		{VersionError{Client: 2, Min: 1, Max: 1}, "the client asked for v2, the worker speaks v1 to v1: upgrade the node to a feedmesh release that speaks v2, or use a client of the node's release"},
		{VersionError{Client: 1, Min: 2, Max: 3}, "the client asked for v1, the worker speaks v2 to v3: upgrade the client to a release that speaks v2 to v3"},
		{VersionError{Client: 0, Min: 1, Max: 1}, "the client asked for no version, the worker speaks v1 to v1: upgrade the client to a release that speaks v1 to v1"},
	} {
		if got := tc.e.Error(); got != ErrUnsupportedVersion.Error()+": "+tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
		if !errors.Is(&tc.e, ErrUnsupportedVersion) {
			t.Errorf("%+v does not wrap ErrUnsupportedVersion", tc.e)
		}
	}
}
