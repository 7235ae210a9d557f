package mesh

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/quic-go/quic-go"
)

// identity is what a node keeps across restarts in its data dir, besides
// its certificate (tls/), its Raft state (raft/) and the members it knows
// (known-members.json, knownmembers.go).
type identity struct {
	name     string
	resetKey quic.StatelessResetKey
}

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// loadIdentity reads the node's name and stateless-reset key from dir,
// creating them on first start. The reset key lets a restarted node reset
// the QUIC connections peers still hold to its previous incarnation, so they
// redial at once instead of waiting for the idle timeout.
func loadIdentity(dir, wantName string) (identity, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return identity{}, fmt.Errorf("create data dir: %w", err)
	}
	var id identity
	namePath := filepath.Join(dir, "node-name")
	b, err := os.ReadFile(namePath)
	switch {
	case err == nil:
		id.name = string(bytes.TrimSpace(b))
		if wantName != "" && wantName != id.name {
			return identity{}, fmt.Errorf("data dir %s belongs to node %q, not %q: use that name or another data dir", dir, id.name, wantName)
		}
	case errors.Is(err, fs.ErrNotExist):
		id.name = wantName
		if id.name == "" {
			var r [4]byte
			if _, err := rand.Read(r[:]); err != nil {
				return identity{}, err
			}
			host, _ := os.Hostname()
			if !validName.MatchString(host) || len(host) > 40 {
				host = "node"
			}
			id.name = host + "-" + hex.EncodeToString(r[:])
		}
		if err := writeFileAtomic(namePath, []byte(id.name+"\n")); err != nil {
			return identity{}, err
		}
	default:
		return identity{}, fmt.Errorf("read node name: %w", err)
	}
	if !validName.MatchString(id.name) {
		return identity{}, fmt.Errorf("node name %q: use letters, digits, '.', '_' and '-' (at most 128)", id.name)
	}
	keyPath := filepath.Join(dir, "stateless-reset.key")
	k, err := os.ReadFile(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		k = make([]byte, len(id.resetKey))
		if _, err := rand.Read(k); err != nil {
			return identity{}, err
		}
		if err := writeFileAtomic(keyPath, k); err != nil {
			return identity{}, err
		}
	} else if err != nil {
		return identity{}, fmt.Errorf("read stateless reset key: %w", err)
	}
	if len(k) != len(id.resetKey) {
		return identity{}, fmt.Errorf("%s: want %d bytes, got %d (delete it to make a new one)", keyPath, len(id.resetKey), len(k))
	}
	copy(id.resetKey[:], k)
	return id, nil
}

// writeFileAtomic replaces path with data through a temporary file that is
// synced before the rename, so that a crash (or power loss) leaves either
// the old content or the new one, never a truncated file.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
