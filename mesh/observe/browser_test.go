package observe_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/feedmesh/feedmesh/mesh/observe"
	"github.com/feedmesh/feedmesh/testcluster"
)

// chromium finds a headless-capable Chromium: $FEEDMESH_CHROMIUM, or
// Debian's chromium on PATH. Without one the browser test skips, unless
// FEEDMESH_REQUIRE_BROWSER=1 (CI installs Debian's chromium and sets it).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FEEDMESH_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("FEEDMESH_REQUIRE_BROWSER") == "1" {
		t.Fatal("no chromium on PATH (apt-get install chromium) and FEEDMESH_REQUIRE_BROWSER=1")
	}
	t.Skip("no chromium on PATH (apt-get install chromium); set FEEDMESH_CHROMIUM to a headless Chromium")
	return ""
}

// headless runs Chromium headless on url with args (after the flags a
// sandboxed, offline machine needs) and returns its standard output.
func headless(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	return string(out)
}

// The status page, loaded in a real headless browser against a running
// cluster, shows the members, the leader, the job with its workers, per-op
// bars with the bounding op highlighted and the diagnosis.
func TestStatusPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and a browser")
	}
	bin := chromium(t)
	c := testcluster.Start(t, 3)
	srv, err := observe.Listen("127.0.0.1:0", c.Node(1), observe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	startJob(t, c, "watched", 40)
	url := "http://" + srv.Addr() + "/?interval=250"

	// The page draws what /status.json says once it has polled a few
	// times; --virtual-time-budget lets its timers and fetches run first.
	var dom string
	bounding := regexp.MustCompile(`class="op bounding" data-op="map\(cost\)"`)
	for deadline := time.Now().Add(2 * time.Minute); ; {
		dom = headless(t, bin, url, "--virtual-time-budget=4000", "--dump-dom")
		if strings.Contains(dom, `data-job="watched"`) && bounding.MatchString(dom) && strings.Contains(dom, "bounds throughput: map(cost)") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed job watched with map(cost) bounding and a diagnosis:\n%s", dom)
		}
	}
	if n := strings.Count(dom, "data-member="); n != 3 {
		t.Errorf("the page lists %d members, want 3", n)
	}
	if m := regexp.MustCompile(`id="leader">([^<]*)<`).FindStringSubmatch(dom); m == nil || m[1] == "?" {
		t.Errorf("the page shows no leader: %v", m)
	}
	if !regexp.MustCompile(`[1-9][0-9]* workers`).MatchString(dom) || !strings.Contains(dom, `<canvas`) {
		t.Error("the job shows no workers or no throughput chart")
	}
	if dir := os.Getenv("FEEDMESH_SCREENSHOT_DIR"); dir != "" {
		shot := filepath.Join(dir, "status-page.png")
		headless(t, bin, url, "--virtual-time-budget=6000", "--window-size=1100,900", "--screenshot="+shot)
		t.Logf("screenshot: %s", shot)
	}
}
