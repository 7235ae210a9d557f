package deploy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ociConfig is the part of an OCI image configuration the test checks.
type ociConfig struct {
	Config struct {
		User         string
		Entrypoint   []string
		Env          []string
		ExposedPorts map[string]struct{}
		Volumes      map[string]struct{}
		StopSignal   string
	} `json:"config"`
}

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

func readBlob(t *testing.T, layout string, d descriptor) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(layout, "blobs", strings.Replace(d.Digest, ":", "/", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != d.Size {
		t.Fatalf("blob %s: %d bytes, the descriptor says %d", d.Digest, len(b), d.Size)
	}
	return b
}

// unpack extracts a gzipped layer into dir, owners and modes kept (as
// root), and returns its entries.
func unpack(t *testing.T, layer []byte, dir string) map[string]*tar.Header {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	entries := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := path.Clean(h.Name)
		if strings.HasPrefix(name, "../") || path.IsAbs(name) {
			t.Fatalf("layer entry %q escapes the root", h.Name)
		}
		entries[name] = h
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, p); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("layer entry %q of type %c", h.Name, h.Typeflag)
		}
		if h.Typeflag != tar.TypeSymlink {
			os.Chmod(p, os.FileMode(h.Mode&0o777)|modeBits(h.Mode))
			if os.Geteuid() == 0 {
				os.Lchown(p, h.Uid, h.Gid)
			}
		}
	}
	return entries
}

func modeBits(m int64) os.FileMode {
	var fm os.FileMode
	if m&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	return fm
}

// needed is the DT_NEEDED names of the ELF file at p.
func needed(t *testing.T, p string) []string {
	t.Helper()
	f, err := elf.Open(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	return libs
}

// TestImage (issue 43, item 1): deploy/image/build.sh builds the image
// offline; its configuration runs `feedmesh node` as user 65532 with the
// data dir a volume; its layer holds the binary, the libraries it and
// libjpeg-turbo need and nothing more; and, as root, the image's binary
// runs from the image's own root filesystem (chroot, as the user 65532):
// `feedmesh version` (its JPEG decoder libjpeg-turbo, found inside the
// image), and a single node started on loopback that answers /readyz and
// `feedmesh status` from within the image, and stops on SIGTERM.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image")
	}
	out := t.TempDir()
	t0 := time.Now()
	cmd := exec.Command("bash", "image/build.sh", "--out", out)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build.sh: %v\n%s", err, b)
	}
	t.Logf("build.sh in %v:\n%s", time.Since(t0).Round(time.Millisecond), strings.TrimSpace(string(b)))
	layout := filepath.Join(out, "oci")
	var index struct{ Manifests []descriptor }
	ib, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ib, &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v %s", err, ib)
	}
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(readBlob(t, layout, index.Manifests[0]), &manifest); err != nil || len(manifest.Layers) != 1 {
		t.Fatalf("manifest: %v %+v", err, manifest)
	}
	var cfg ociConfig
	if err := json.Unmarshal(readBlob(t, layout, manifest.Config), &cfg); err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/usr/bin/feedmesh", "node"}) || c.StopSignal != "SIGTERM" {
		t.Errorf("config: user %q, entrypoint %v, stop signal %q", c.User, c.Entrypoint, c.StopSignal)
	}
	if _, ok := c.Volumes["/var/lib/feedmesh"]; !ok {
		t.Errorf("config: volumes %v, want /var/lib/feedmesh", c.Volumes)
	}
	for _, p := range []string{"7946/tcp", "7946/udp", "7947/udp", "9947/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("config: port %s not exposed", p)
		}
	}
	if !slices.Contains(c.Env, "FEEDMESH_DATA_DIR=/var/lib/feedmesh") || !slices.Contains(c.Env, "FEEDMESH_METRICS_ADDR=0.0.0.0:9947") {
		t.Errorf("config: env %v", c.Env)
	}
	layer := readBlob(t, layout, manifest.Layers[0])
	rootfs := filepath.Join(out, "unpacked")
	entries := unpack(t, layer, rootfs)
	unpacked := int64(0)
	for _, h := range entries {
		unpacked += h.Size
	}
	t.Logf("image: one layer of %.1f MB (%.1f MB unpacked, %d entries); the binary %.1f MB", float64(len(layer))/1e6, float64(unpacked)/1e6, len(entries), float64(entries["usr/bin/feedmesh"].Size)/1e6)

	// What the layer holds: the binary, the libraries in the closure of
	// what it and libjpeg need, the few files of /etc, and directories.
	if h := entries["var/lib/feedmesh"]; h == nil || h.Uid != 65532 || h.Mode&0o777 != 0o700 {
		t.Errorf("the data dir: %+v, want 65532's, 0700", h)
	}
	libs := map[string]string{} // soname -> path in the image
	for name, h := range entries {
		if h.Typeflag == tar.TypeReg && strings.Contains(path.Base(name), ".so") {
			libs[path.Base(name)] = name
		}
	}
	want := map[string]bool{}
	var visit func(p string)
	visit = func(p string) {
		for _, so := range needed(t, filepath.Join(rootfs, p)) {
			if want[so] {
				continue
			}
			want[so] = true
			lp, ok := libs[so]
			if !ok {
				t.Errorf("%s needs %s, which the image lacks", p, so)
				continue
			}
			visit(lp)
		}
	}
	visit("usr/bin/feedmesh")
	if jp, ok := libs["libjpeg.so.62"]; ok {
		want["libjpeg.so.62"] = true
		visit(jp)
	} else if _, err := os.Stat("/usr/include/jpeglib.h"); err == nil {
		t.Error("the build machine has libjpeg-turbo's header, but the image has no libjpeg.so.62")
	}
	for so := range libs {
		if !want[so] {
			t.Errorf("the image holds %s, which nothing needs", so)
		}
	}
	allowed := []string{"etc/passwd", "etc/group", "etc/nsswitch.conf", "etc/ssl/certs/ca-certificates.crt", "usr/bin/feedmesh"}
	for name, h := range entries {
		if h.Typeflag == tar.TypeReg && !slices.Contains(allowed, name) && !strings.Contains(path.Base(name), ".so") {
			t.Errorf("the image holds %s, which is none of the files it should hold", name)
		}
	}
	t.Logf("libraries: %v", slices.Sorted(func(yield func(string) bool) {
		for so := range libs {
			if !yield(so) {
				return
			}
		}
	}))

	if os.Geteuid() != 0 {
		t.Skip("skipped the run from the image's root filesystem: chroot needs root (CI runs as root)")
	}
	inImage := func(args ...string) *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = "/"
		cmd.Env = append([]string{"FEEDMESH_QUIET=1"}, c.Env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}, Pdeathsig: syscall.SIGKILL}
		return cmd
	}
	vb, err := inImage("/usr/bin/feedmesh", "version").CombinedOutput()
	if err != nil {
		t.Fatalf("feedmesh version in the image: %v\n%s", err, vb)
	}
	t.Logf("feedmesh version, in the image:\n%s", strings.TrimSpace(string(vb)))
	if _, ok := libs["libjpeg.so.62"]; ok && !strings.Contains(string(vb), "libjpeg-turbo") {
		t.Errorf("the image holds libjpeg.so.62, but its binary does not load it:\n%s", vb)
	}

	ports := freePorts(t, 3)
	node := inImage("/usr/bin/feedmesh", "node", "--bind", "127.0.0.1", "--gossip-port", fmt.Sprint(ports[0]), "--port", fmt.Sprint(ports[1]),
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", ports[2]), "--preset", "fast", "--log-level", "warn")
	var nodeOut bytes.Buffer
	node.Stdout, node.Stderr = &nodeOut, &nodeOut
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- node.Wait() }()
	defer func() {
		node.Process.Kill()
	}()
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[2])
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err := http.Get(readyz); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("the node in the image exited: %v\n%s", err, nodeOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node in the image not ready within 30 s:\n%s", nodeOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	sb, err := inImage("/usr/bin/feedmesh", "status", "--addr", fmt.Sprintf("127.0.0.1:%d", ports[1])).CombinedOutput()
	if err != nil || !strings.Contains(string(sb), "leader") {
		t.Fatalf("feedmesh status in the image: %v\n%s", err, sb)
	}
	t.Logf("feedmesh status, in the image:\n%s", strings.TrimSpace(string(sb)))
	if fi, err := os.Stat(filepath.Join(rootfs, "var/lib/feedmesh/raft")); err != nil || !fi.IsDir() {
		t.Errorf("the node kept no Raft state in its data dir (the volume): %v", err)
	}
	node.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the node in the image after SIGTERM: %v\n%s", err, nodeOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("the node in the image still runs 20 s after SIGTERM")
	}
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	for len(out) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		l.Close()
		if err == nil {
			u.Close()
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}
