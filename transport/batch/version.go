package batch

import (
	"errors"
	"fmt"
)

// Protocol versions of the batch stream. A client's Open names the one
// version it speaks, ProtocolVersion; a worker speaks MinProtocolVersion
// through ProtocolVersion, answers an Open of one of them with an Accept
// naming it, and refuses any other with an End that names its range (see
// VersionError). A version's messages never change meaning: a change a peer
// must understand (a new field it may not ignore, another tail layout) comes
// with a new version, and a worker that still serves the older one branches
// on Sender.Version, as the state machine's handlers (internal/fsm) branch on a command's Version.
//
// Two things are the same in every version, so that any two peers can tell
// each other they disagree: the Open's kind and version (keys 0 and 21),
// and the refusal, an End (key 0) with Failed, Error and the worker's range
// (keys 12, 13, 21 and 22).
const (
	// ProtocolVersion is the version this package's Receiver opens streams
	// with, and the newest one its Sender speaks.
	ProtocolVersion uint16 = 1
	// MinProtocolVersion is the oldest version a Sender still speaks.
	MinProtocolVersion uint16 = 1
)

// ErrUnsupportedVersion is wrapped by the error of a stream refused because
// its two ends speak no common protocol version: Accept's on the worker,
// Next's on the client. Opening the stream again does not help; upgrading
// the client or the node does.
var ErrUnsupportedVersion = errors.New("unsupported batch protocol version")

// VersionError says which versions a refused stream's ends speak. It
// wraps ErrUnsupportedVersion.
type VersionError struct {
	// Client is the version the client's Open asked for; 0 for an Open
	// with none.
	Client uint16
	// Min and Max are the versions the worker speaks; both 0 for a worker
	// from before protocol versions, which answers an Open without an
	// Accept.
	Min, Max uint16
}

// Error says what each end speaks and which one to upgrade.
func (e *VersionError) Error() string {
	what := "upgrade the client or the node so that both speak one version"
	switch {
	case e.Client > e.Max:
		what = fmt.Sprintf("upgrade the node to a feedmesh release that speaks v%d, or use a client of the node's release", e.Client)
	case e.Client < e.Min:
		what = fmt.Sprintf("upgrade the client to a release that speaks v%d to v%d", e.Min, e.Max)
	}
	client := fmt.Sprintf("v%d", e.Client)
	if e.Client == 0 {
		client = "no version"
	}
	worker := fmt.Sprintf("speaks v%d to v%d", e.Min, e.Max)
	if e.Max == 0 {
		worker = "predates protocol versions (it answered without an Accept)"
	}
	return fmt.Sprintf("%v: the client asked for %s, the worker %s: %s", ErrUnsupportedVersion, client, worker, what)
}

// Unwrap returns ErrUnsupportedVersion.
func (e *VersionError) Unwrap() error { return ErrUnsupportedVersion }

// speaks reports whether a worker of this package serves an Open of
// version v.
func speaks(v uint16) bool { return v >= MinProtocolVersion && v <= ProtocolVersion }

// refusal returns the End with which a worker refuses an Open of version
// v, and the error it says.
func refusal(v uint16) (wireMsg, *VersionError) {
	e := &VersionError{Client: v, Min: MinProtocolVersion, Max: ProtocolVersion}
	return wireMsg{Kind: kindEnd, Failed: true, Error: e.Error(), Version: e.Max, MinVersion: e.Min}, e
}

// refused returns the error of an End that carries a protocol version
// range: the worker refusing the client's Open, a *VersionError. Such an
// End after the worker's Accept (accepted), or one that contradicts itself,
// is malformed.
func refused(m *wireMsg, accepted bool) error {
	switch {
	case accepted:
		return malformed("end refusing the protocol version after the worker's accept")
	case !m.Failed || m.MinVersion == 0 || m.MinVersion > m.Version || (ProtocolVersion >= m.MinVersion && ProtocolVersion <= m.Version):
		return malformed("end refusing protocol v%d, though the worker speaks v%d to v%d (failed: %v)", ProtocolVersion, m.MinVersion, m.Version, m.Failed)
	}
	return &VersionError{Client: ProtocolVersion, Min: m.MinVersion, Max: m.Version}
}
