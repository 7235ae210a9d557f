package mesh

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/api"
)

func TestKnownMembersRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := []knownMember{{"n2", "127.0.0.1:8946"}, {"n3", "10.0.0.7:7946"}, {"n4.example", "host.example:7946"}}
	if err := writeKnownMembers(dir, want); err != nil {
		t.Fatal(err)
	}
	got, exists, err := readKnownMembers(dir, 32)
	if err != nil || !exists || !slices.Equal(got, want) {
		t.Fatalf("read back %v (exists %v, err %v), want %v", got, exists, err, want)
	}
	if _, err := os.Stat(filepath.Join(dir, knownMembersFile+".tmp")); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, knownMembersFile))
	if !bytes.Contains(b, []byte(`"version": 1`)) || !bytes.Contains(b, []byte(`"gossip_addr": "127.0.0.1:8946"`)) {
		t.Errorf("file does not read as documented:\n%s", b)
	}
}

func TestKnownMembersMissingFile(t *testing.T) {
	got, exists, err := readKnownMembers(t.TempDir(), 32)
	if got != nil || exists || err != nil {
		t.Fatalf("got %v, exists %v, err %v; want nothing and no error", got, exists, err)
	}
}

func TestKnownMembersBadFiles(t *testing.T) {
	big := `{"version":1,"members":[` + strings.Repeat(`{"name":"n","gossip_addr":"127.0.0.1:1"},`, 1000) + `{"name":"n","gossip_addr":"127.0.0.1:1"}]}`
	for _, tc := range []struct {
		name, content, want string
	}{
		{"not json", "\x00\x01garbage", "corrupt"},
		{"truncated", `{"version":1,"members":[{"name":"n2","gos`, "corrupt"},
		{"other version", `{"version":2,"members":[]}`, "version 2"},
		{"no version", `{"members":[]}`, "version 0"},
		{"bad name", `{"version":1,"members":[{"name":"../x","gossip_addr":"127.0.0.1:1"}]}`, "invalid name"},
		{"no port", `{"version":1,"members":[{"name":"n2","gossip_addr":"127.0.0.1"}]}`, "gossip address"},
		{"port out of range", `{"version":1,"members":[{"name":"n2","gossip_addr":"127.0.0.1:70000"}]}`, "port in 1-65535"},
		{"oversized", big, "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, knownMembersFile), []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, exists, err := readKnownMembers(dir, 4)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), knownMembersFile) {
				t.Fatalf("err = %v, want one naming the file and saying %q", err, tc.want)
			}
			if got != nil || !exists {
				t.Fatalf("got %v, exists %v; want no members from a file that exists", got, exists)
			}
			// The node starts anyway, says why it ignores the file, and
			// does not bootstrap alone (the file says it knew a cluster).
			var logs bytes.Buffer
			k, ms, knew := newKnownMembers(dir, 4, slog.New(slog.NewTextHandler(&logs, nil)))
			if ms != nil || !knew || k == nil || !strings.Contains(logs.String(), "level=WARN") {
				t.Fatalf("newKnownMembers: members %v, knew %v; log %q", ms, knew, logs.String())
			}
		})
	}
}

func TestKnownMembersBound(t *testing.T) {
	var ms []api.Member
	for i := 9; i >= 0; i-- {
		ms = append(ms, api.Member{Name: fmt.Sprintf("n%d", i), GossipAddr: fmt.Sprintf("127.0.0.1:%d", 7000+i), Status: api.StatusAlive})
	}
	picked := pickKnownMembers("n0", ms, 4)
	want := []knownMember{{"n1", "127.0.0.1:7001"}, {"n2", "127.0.0.1:7002"}, {"n3", "127.0.0.1:7003"}, {"n4", "127.0.0.1:7004"}}
	if !slices.Equal(picked, want) {
		t.Fatalf("picked %v, want %v", picked, want)
	}

	// A file written under a larger bound is cut to the current one.
	dir := t.TempDir()
	all := pickKnownMembers("self", ms, 10)
	if err := writeKnownMembers(dir, all); err != nil {
		t.Fatal(err)
	}
	got, _, err := readKnownMembers(dir, 3)
	if err != nil || !slices.Equal(got, all[:3]) {
		t.Fatalf("read with bound 3: %v, %v; want %v", got, err, all[:3])
	}
	// The largest file the bound allows is read; the size check is not
	// tighter than what the node writes with the longest names and hosts.
	long := make([]knownMember, 3)
	for i := range long {
		long[i] = knownMember{Name: strings.Repeat("n", 127) + fmt.Sprint(i), GossipAddr: strings.Repeat("h", 253) + ":65535"}
	}
	if err := writeKnownMembers(dir, long); err != nil {
		t.Fatal(err)
	}
	if got, _, err := readKnownMembers(dir, 3); err != nil || len(got) != 3 {
		t.Fatalf("longest entries: %d read, err %v", len(got), err)
	}
}

func TestPickKnownMembers(t *testing.T) {
	now := time.Now()
	ms := []api.Member{
		{Name: "self", GossipAddr: "127.0.0.1:1", Status: api.StatusAlive},
		{Name: "c", GossipAddr: "127.0.0.1:4", Status: api.StatusSuspect, Since: now},
		{Name: "a", GossipAddr: "127.0.0.1:2", Status: api.StatusAlive},
		{Name: "dead", GossipAddr: "127.0.0.1:5", Status: api.StatusDead},
		{Name: "left", GossipAddr: "127.0.0.1:6", Status: api.StatusLeft},
		{Name: "noaddr", Status: api.StatusAlive},
	}
	got := pickKnownMembers("self", ms, 32)
	want := []knownMember{{"a", "127.0.0.1:2"}, {"c", "127.0.0.1:4"}}
	if !slices.Equal(got, want) {
		t.Fatalf("picked %v, want %v (alive and suspect others, by name)", got, want)
	}
	if got := knownAddrs(append(want, knownMember{"self", "127.0.0.1:1"}), "self"); !slices.Equal(got, []string{"127.0.0.1:2", "127.0.0.1:4"}) {
		t.Fatalf("join addresses %v", got)
	}
}

func TestKnownMembersWrites(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, knownMembersFile)
	k, ms, knew := newKnownMembers(dir, 8, discardLogger())
	if ms != nil || knew {
		t.Fatalf("fresh data dir: members %v, knew %v", ms, knew)
	}
	k.save(nil)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("an empty list was written to a fresh data dir")
	}
	one := []knownMember{{"n2", "127.0.0.1:2"}}
	k.save(one)
	stat := func() os.FileInfo {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	first := stat() // a rewrite renames a new file over it: another inode
	// Losing sight of every member keeps the list it had.
	k.save(nil)
	if got, _, _ := readKnownMembers(dir, 8); !slices.Equal(got, one) {
		t.Fatalf("after an empty view the file holds %v, want %v", got, one)
	}
	k.save(slices.Clone(one)) // unchanged: not rewritten
	if !os.SameFile(stat(), first) {
		t.Error("an unchanged list was rewritten")
	}
	two := []knownMember{{"n2", "127.0.0.1:2"}, {"n3", "127.0.0.1:3"}}
	k.close(two)
	k.save(one) // after close: ignored
	if got, _, _ := readKnownMembers(dir, 8); !slices.Equal(got, two) {
		t.Fatalf("after close the file holds %v, want the final %v", got, two)
	}

	// A restart finds the list; a crash (close with nil) writes nothing.
	k2, ms, knew := newKnownMembers(dir, 8, discardLogger())
	if !slices.Equal(ms, two) || !knew {
		t.Fatalf("restart: members %v, knew %v", ms, knew)
	}
	k2.close(nil)
	if got, _, _ := readKnownMembers(dir, 8); !slices.Equal(got, two) {
		t.Fatalf("after a crash the file holds %v", got)
	}

	// KnownMembersMax 0: no file is read or written.
	k3, ms, knew := newKnownMembers(dir, 0, discardLogger())
	if ms != nil || knew {
		t.Fatalf("bound 0 read %v, knew %v", ms, knew)
	}
	k3.save(one)
	if got, _, _ := readKnownMembers(dir, 8); !slices.Equal(got, two) {
		t.Fatalf("bound 0 wrote the file: %v", got)
	}
}
