package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Offload auto can remember its profiles per (pipeline fingerprint, host),
// as FastFlow's metric store does, so that a repeated job on the same host
// starts without profiling: a small JSON file, kept only where the user
// names one (Options.OffloadProfiles, `feedmesh read --offload-profiles`,
// Python's offload_profiles). By default nothing is kept anywhere: what one
// process measured does not change another's jobs behind its back (a
// hidden per-user file did, issue 42), and every job profiles for itself.
// At most maxProfiles entries, the oldest dropped first. A file that
// cannot be read or parsed is ignored (and replaced at the next store):
// the file only saves time.

const maxProfiles = 256

type profileEntry struct {
	Profile OffloadProfile `json:"profile"`
	At      time.Time      `json:"at"`
}

// profileStore is one cache file; its methods are safe for concurrent use
// within the process (writes go through a temporary file and a rename).
type profileStore struct {
	path string // "": off
	mu   sync.Mutex
}

// profileStoreFor resolves Options.OffloadProfiles: "" (and "off", as
// before the default changed) keeps none.
func profileStoreFor(opt string) *profileStore {
	if opt == "" || opt == "off" {
		return &profileStore{}
	}
	return &profileStore{path: opt}
}

func profileKey(fingerprint string) string {
	host, _ := os.Hostname()
	return fingerprint + "@" + host
}

func (s *profileStore) read() map[string]profileEntry {
	m := map[string]profileEntry{}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return m
	}
	if json.Unmarshal(b, &m) != nil {
		return map[string]profileEntry{}
	}
	return m
}

// load returns the profile remembered for fingerprint on this host.
func (s *profileStore) load(fingerprint string) (OffloadProfile, bool) {
	if s == nil || s.path == "" || fingerprint == "" {
		return OffloadProfile{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.read()[profileKey(fingerprint)]
	if !ok || !(e.Profile.Ingest > 0) || !(e.Profile.Local > 0) {
		return OffloadProfile{}, false
	}
	return e.Profile, true
}

// store remembers p for fingerprint on this host.
func (s *profileStore) store(fingerprint string, p OffloadProfile) error {
	if s == nil || s.path == "" || fingerprint == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.read()
	m[profileKey(fingerprint)] = profileEntry{Profile: p, At: time.Now()}
	if len(m) > maxProfiles {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return m[keys[i]].At.Before(m[keys[j]].At) })
		for _, k := range keys[:len(m)-maxProfiles] {
			delete(m, k)
		}
	}
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("offload profiles: %w", err)
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("offload profiles: %w", err)
	}
	return os.Rename(tmp, s.path)
}
