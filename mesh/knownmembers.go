package mesh

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/api"
)

// knownMembersFile is the file, in the data dir next to the node's
// identity, that holds the gossip addresses of the members the node last
// saw alive. A restarted node joins them, with or without --join, as Serf
// rejoins the members its snapshot recorded: without it, a node restarted
// without --join after a graceful stop stays alone, held "left" by the
// others, for good.
const knownMembersFile = "known-members.json"

// knownMembersVersion is the file format's version; a node refuses (and
// ignores) a file of another version.
const knownMembersVersion = 1

// knownMember is one entry of the file.
type knownMember struct {
	Name       string `json:"name"`
	GossipAddr string `json:"gossip_addr"`
}

type knownMembersDoc struct {
	Version int           `json:"version"`
	Members []knownMember `json:"members"`
}

// maxKnownMembersBytes bounds the file a node reads for a given member
// bound: a name is at most 128 bytes and an address at most a host name
// (253) and a port, so an entry this node writes is well under 512 bytes.
func maxKnownMembersBytes(maxMembers int) int64 {
	return 1024 + int64(maxMembers)*512
}

// pickKnownMembers chooses what the file records: the members other than
// self that gossip holds alive or suspect (suspicion is not failure), by
// name, at most maxMembers of them. Members held dead or left are not
// recorded: a restarted node would only wait on them.
func pickKnownMembers(self string, ms []api.Member, maxMembers int) []knownMember {
	var out []knownMember
	for _, m := range ms {
		if m.Name == self || m.GossipAddr == "" || (m.Status != api.StatusAlive && m.Status != api.StatusSuspect) {
			continue
		}
		out = append(out, knownMember{Name: m.Name, GossipAddr: m.GossipAddr})
	}
	slices.SortFunc(out, func(a, b knownMember) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	if len(out) > maxMembers {
		out = out[:maxMembers]
	}
	return out
}

// readKnownMembers reads the file in dir. A missing file is no error (nil,
// false, nil); exists reports whether there was a file at all, readable or
// not. A file larger than maxMembers entries can be, not JSON, of another
// version, or with an entry that is not a valid name and host:port is an
// error that names the file. A file with more entries than maxMembers (the
// bound was lowered since it was written) is cut to the first maxMembers.
func readKnownMembers(dir string, maxMembers int) (ms []knownMember, exists bool, err error) {
	path := filepath.Join(dir, knownMembersFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, fmt.Errorf("read known members: %w", err)
	}
	defer f.Close()
	limit := maxKnownMembersBytes(maxMembers)
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, true, fmt.Errorf("read known members %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, true, fmt.Errorf("known members %s: more than %d bytes, larger than %d members (KnownMembersMax) take: not a file this node wrote", path, limit, maxMembers)
	}
	var doc knownMembersDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, true, fmt.Errorf("known members %s: corrupt: %w", path, err)
	}
	if doc.Version != knownMembersVersion {
		return nil, true, fmt.Errorf("known members %s: version %d, this node reads version %d", path, doc.Version, knownMembersVersion)
	}
	for i, m := range doc.Members {
		if !validName.MatchString(m.Name) {
			return nil, true, fmt.Errorf("known members %s: entry %d: invalid name %q", path, i, m.Name)
		}
		if err := checkGossipAddr(m.GossipAddr); err != nil {
			return nil, true, fmt.Errorf("known members %s: entry %d (%s): %w", path, i, m.Name, err)
		}
	}
	if len(doc.Members) > maxMembers {
		doc.Members = doc.Members[:maxMembers]
	}
	return doc.Members, true, nil
}

func checkGossipAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("gossip address %q: %w", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || host == "" {
		return fmt.Errorf("gossip address %q: want host:port with a port in 1-65535", addr)
	}
	return nil
}

// writeKnownMembers replaces the file in dir atomically (temporary file,
// fsync, rename), so a crash leaves the old list or the new one.
func writeKnownMembers(dir string, ms []knownMember) error {
	if ms == nil {
		ms = []knownMember{}
	}
	b, err := json.MarshalIndent(knownMembersDoc{Version: knownMembersVersion, Members: ms}, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, knownMembersFile), append(b, '\n')); err != nil {
		return fmt.Errorf("write known members: %w", err)
	}
	return nil
}

// knownMembers keeps the file current for one node. Writes are skipped
// when the list has not changed, and when it became empty: a node that
// sees no other member (cut off by a partition, or just restarted and not
// yet rejoined) keeps the list it had, which is the one it will need.
type knownMembers struct {
	dir        string
	maxMembers int
	log        *slog.Logger

	mu     sync.Mutex
	last   []knownMember // what the file holds
	closed bool          // the node stopped: no more writes
}

// newKnownMembers loads the file in dir. It returns the members found,
// and whether the data dir holds a known-members file at all (a node that
// has one was part of a cluster and must not bootstrap alone). An
// unreadable file is logged and ignored: the node starts, and rewrites it
// once it has rejoined.
func newKnownMembers(dir string, maxMembers int, log *slog.Logger) (*knownMembers, []knownMember, bool) {
	k := &knownMembers{dir: dir, maxMembers: maxMembers, log: log}
	if maxMembers <= 0 {
		k.closed = true
		return k, nil, false
	}
	ms, exists, err := readKnownMembers(dir, maxMembers)
	if err != nil {
		log.Warn("ignoring the known members in the data dir; give --join to rejoin the cluster", "err", err)
	}
	k.last = ms
	return k, ms, exists
}

// save writes ms if it differs from what the file holds and is not empty.
func (k *knownMembers) save(ms []knownMember) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.saveLocked(ms)
}

func (k *knownMembers) saveLocked(ms []knownMember) {
	if k.closed || len(ms) == 0 || slices.Equal(ms, k.last) {
		return
	}
	if err := writeKnownMembers(k.dir, ms); err != nil {
		k.log.Warn("could not record the known members; a restart without --join may not rejoin", "err", err)
		return
	}
	k.last = ms
}

// close saves final (unless nil: a crash writes nothing) and stops every
// later write, so a view taken while the node leaves cannot replace it.
func (k *knownMembers) close(final []knownMember) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if final != nil {
		k.saveLocked(final)
	}
	k.closed = true
}

// knownMembersLoop records the known members whenever membership changes,
// at most once per KnownMembersInterval.
func (n *Node) knownMembersLoop(changed <-chan struct{}) {
	defer n.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		n.known.save(n.pickKnownMembers())
		select {
		case <-n.ctx.Done():
			return
		case <-changed:
		}
		t.Reset(n.cfg.KnownMembersInterval)
	}
}

func (n *Node) pickKnownMembers() []knownMember {
	return pickKnownMembers(n.name, n.members.snapshot(), n.cfg.KnownMembersMax)
}

// knownAddrs lists the gossip addresses of ms, leaving out this node's own.
func knownAddrs(ms []knownMember, self string) []string {
	var out []string
	for _, m := range ms {
		if m.Name != self {
			out = append(out, m.GossipAddr)
		}
	}
	return out
}
