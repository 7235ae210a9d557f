// Command mkimage packs a root filesystem as a one-layer OCI image (an
// image layout directory and, with --archive, the same as a tar file),
// with the feedmesh node's image configuration: user feedmesh (65532),
// entrypoint `feedmesh node`, the data dir /var/lib/feedmesh a volume,
// the node's ports, SIGTERM to stop (it drains). It uses the standard
// library only and never reaches a network: deploy/image/build.sh runs
// it on the root filesystem it assembled.
//
// The layer is reproducible: entries in name order, every timestamp
// --epoch (default $SOURCE_DATE_EPOCH, else 0), every file owned by root
// except the data dir and what is below it (65532:65532), modes as on
// disk (the data dir 0700, /tmp 1777).
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The image's user and data dir.
const (
	uid, gid = 65532, 65532
	dataDir  = "var/lib/feedmesh"
)

func main() {
	rootfs := flag.String("rootfs", "", "the root filesystem to pack (required)")
	out := flag.String("out", "", "the OCI image layout directory to write (required)")
	archive := flag.String("archive", "", "also write the layout as this tar file (oci-archive)")
	version := flag.String("version", "dev", "the image's version (its ref name and label)")
	arch := flag.String("arch", runtime.GOARCH, "the image's architecture")
	epochFlag := flag.Int64("epoch", -1, "the timestamp of every file, in seconds (default $SOURCE_DATE_EPOCH, else 0)")
	flag.Parse()
	if *rootfs == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	epoch := *epochFlag
	if epoch < 0 {
		epoch, _ = strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	}
	if err := build(*rootfs, *out, *archive, *version, *arch, time.Unix(epoch, 0).UTC()); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func build(rootfs, out, archive, version, arch string, mtime time.Time) error {
	var layerTar bytes.Buffer
	if err := packLayer(rootfs, &layerTar, mtime); err != nil {
		return err
	}
	diffID := sha256.Sum256(layerTar.Bytes())
	var layerGz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&layerGz, gzip.BestCompression)
	zw.ModTime = mtime
	if _, err := zw.Write(layerTar.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}

	if err := os.RemoveAll(out); err != nil {
		return err
	}
	blobs := filepath.Join(out, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return err
	}
	writeBlob := func(b []byte) (string, error) {
		sum := sha256.Sum256(b)
		h := hex.EncodeToString(sum[:])
		return "sha256:" + h, os.WriteFile(filepath.Join(blobs, h), b, 0o644)
	}
	layerDigest, err := writeBlob(layerGz.Bytes())
	if err != nil {
		return err
	}
	config := map[string]any{
		"created":      mtime.Format(time.RFC3339),
		"architecture": arch,
		"os":           "linux",
		"config": map[string]any{
			"User":       fmt.Sprintf("%d:%d", uid, gid),
			"Entrypoint": []string{"/usr/bin/feedmesh", "node"},
			"Env": []string{
				"PATH=/usr/bin",
				"FEEDMESH_DATA_DIR=/" + dataDir,
				// The health endpoints and metrics: on every address of
				// the container, for probes and Prometheus.
				"FEEDMESH_METRICS_ADDR=0.0.0.0:9947",
			},
			"WorkingDir": "/" + dataDir,
			"ExposedPorts": map[string]any{
				"7946/tcp": struct{}{}, "7946/udp": struct{}{}, // gossip
				"7947/udp": struct{}{}, // QUIC: Raft, control, data
				"9947/tcp": struct{}{}, // metrics, /livez, /readyz
			},
			"Volumes":    map[string]any{"/" + dataDir: struct{}{}},
			"StopSignal": "SIGTERM",
			"Labels": map[string]string{
				"org.opencontainers.image.title":       "feedmesh",
				"org.opencontainers.image.description": "feedmesh node: a peer-to-peer input-data service for ML training",
				"org.opencontainers.image.version":     version,
			},
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
		"history": []map[string]string{{"created": mtime.Format(time.RFC3339), "created_by": "deploy/image/build.sh"}},
	}
	configJSON, _ := json.Marshal(config)
	configDigest, err := writeBlob(configJSON)
	if err != nil {
		return err
	}
	manifest := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": configDigest, "size": len(configJSON)},
		"layers":        []map[string]any{{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layerDigest, "size": layerGz.Len()}},
		"annotations":   map[string]string{"org.opencontainers.image.version": version},
	}
	manifestJSON, _ := json.Marshal(manifest)
	manifestDigest, err := writeBlob(manifestJSON)
	if err != nil {
		return err
	}
	index := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []map[string]any{{
			"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifestDigest, "size": len(manifestJSON),
			"platform":    map[string]string{"architecture": arch, "os": "linux"},
			"annotations": map[string]string{"org.opencontainers.image.ref.name": version},
		}},
	}
	indexJSON, _ := json.Marshal(index)
	if err := os.WriteFile(filepath.Join(out, "index.json"), indexJSON, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		return err
	}
	fmt.Printf("mkimage: %s: manifest %s, layer %d bytes (%d unpacked)\n", out, manifestDigest, layerGz.Len(), layerTar.Len())
	if archive == "" {
		return nil
	}
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	if err := packDir(out, f, mtime); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// packLayer writes rootfs as a layer: ownership and times fixed.
func packLayer(rootfs string, w io.Writer, mtime time.Time) error {
	tw := tar.NewWriter(w)
	err := walkSorted(rootfs, func(rel string, fi fs.FileInfo) error {
		owner := 0
		if rel == dataDir || strings.HasPrefix(rel, dataDir+"/") {
			owner = uid
		}
		return addEntry(tw, filepath.Join(rootfs, rel), rel, fi, owner, mtime)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// packDir writes dir as a tar (the oci-archive of a layout).
func packDir(dir string, w io.Writer, mtime time.Time) error {
	tw := tar.NewWriter(w)
	err := walkSorted(dir, func(rel string, fi fs.FileInfo) error {
		return addEntry(tw, filepath.Join(dir, rel), rel, fi, 0, mtime)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func addEntry(tw *tar.Writer, path, rel string, fi fs.FileInfo, owner int, mtime time.Time) error {
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		var err error
		if link, err = os.Readlink(path); err != nil {
			return err
		}
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	h.Name = rel
	if fi.IsDir() {
		h.Name += "/"
	}
	h.Uid, h.Gid, h.Uname, h.Gname = owner, owner, "", ""
	h.ModTime, h.AccessTime, h.ChangeTime = mtime, time.Time{}, time.Time{}
	h.Format = tar.FormatPAX
	h.PAXRecords = nil
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if fi.Mode().IsRegular() {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.Copy(tw, f); err != nil {
			return err
		}
	}
	return nil
}

// walkSorted calls fn for every entry below root (not root itself), in
// name order, with its slash-separated path relative to root.
func walkSorted(root string, fn func(rel string, fi fs.FileInfo) error) error {
	var rels []string
	err := filepath.Walk(root, func(p string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			rel, _ := filepath.Rel(root, p)
			rels = append(rels, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(rels)
	for _, rel := range rels {
		fi, err := os.Lstat(filepath.Join(root, rel))
		if err != nil {
			return err
		}
		if err := fn(rel, fi); err != nil {
			return err
		}
	}
	return nil
}
