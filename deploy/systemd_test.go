package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// unitKeys reads a systemd unit or environment file into key=value pairs
// (repeated keys keep the last).
func unitKeys(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("%s: %q is no key=value", path, line)
			continue
		}
		out[k] = v
	}
	return out
}

// TestSystemdUnit: systemd-analyze verify finds nothing to say of the
// unit (where the machine has it: an unknown key, a typo, is an error);
// the unit runs `feedmesh node` as its own user with
// its state directory, stops it with SIGTERM and waits long enough for
// the example's --drain-timeout and the leave; every variable of the
// example environment file is a flag of `feedmesh node`.
func TestSystemdUnit(t *testing.T) {
	unit := unitKeys(t, "systemd/feedmesh.service")
	env := unitKeys(t, "systemd/feedmesh.env")
	if !strings.HasSuffix(unit["ExecStart"], "/feedmesh node") || unit["User"] != "feedmesh" || unit["KillSignal"] != "SIGTERM" || unit["StateDirectory"] != "feedmesh" {
		t.Errorf("unit: ExecStart %q, User %q, KillSignal %q, StateDirectory %q", unit["ExecStart"], unit["User"], unit["KillSignal"], unit["StateDirectory"])
	}
	if unit["EnvironmentFile"] != "/etc/feedmesh/feedmesh.env" {
		t.Errorf("unit: EnvironmentFile %q", unit["EnvironmentFile"])
	}
	if env["FEEDMESH_DATA_DIR"] != "/var/lib/feedmesh" {
		t.Errorf("the data dir %q is not the unit's StateDirectory", env["FEEDMESH_DATA_DIR"])
	}
	stop, err := time.ParseDuration(unit["TimeoutStopSec"] + "s")
	if err != nil {
		t.Fatal(err)
	}
	drain, err := time.ParseDuration(env["FEEDMESH_DRAIN_TIMEOUT"])
	if err != nil {
		t.Fatal(err)
	}
	if stop < drain+15*time.Second {
		t.Errorf("TimeoutStopSec %v does not cover FEEDMESH_DRAIN_TIMEOUT %v and the leave", stop, drain)
	}
	if testing.Short() {
		return
	}
	_, envs := nodeFlags(t)
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		// verify wants ExecStart's binary to exist: the one just built.
		b, err := os.ReadFile("systemd/feedmesh.service")
		if err != nil {
			t.Fatal(err)
		}
		u := filepath.Join(t.TempDir(), "feedmesh.service")
		os.WriteFile(u, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/feedmesh", feedmeshBinary(t))), 0o644)
		out, err := exec.Command(sa, "verify", u).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	} else {
		t.Log("no systemd-analyze: the unit's keys are not verified")
	}
	for k := range env {
		if !envs[k] {
			t.Errorf("feedmesh.env sets %s, which is no flag of feedmesh node", k)
		}
	}
}
