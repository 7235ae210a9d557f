package formats

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// SplitVersion identifies the input split s of a files source reads, as
// it is now: what the autocache stamps a cached split with, and compares
// before it serves one, so that a cache never returns what the pipeline
// would not compute now. A local file is identified by its size and
// modification time, an object by its ETag (by its size when it has
// none), an image folder's split by those of each image it reads. Two
// equal versions mean the same bytes, as far as the file system or the
// object store tells; a file rewritten within its modification time's
// granularity with the same size is the one case it misses.
func SplitVersion(ctx context.Context, o FilesOptions, s Split) (string, error) {
	o = o.WithDefaults()
	if o.Format == FormatImageFolder {
		return imageSplitVersion(o, s)
	}
	if objstore.IsRemote(s.Path) {
		f, err := o.access().Open(ctx, s.Path, o.Store)
		if err != nil {
			return "", fmt.Errorf("files source: version of split %d: %w", s.ID, err)
		}
		defer f.Close()
		if v, ok := f.(objstore.Versioned); ok && v.Version() != "" {
			return "etag=" + v.Version(), nil
		}
		return fmt.Sprintf("size=%d", f.Size()), nil
	}
	return fileVersion(o.access(), s.Path)
}

func fileVersion(acc *objstore.Access, path string) (string, error) {
	st, err := acc.Stat(path)
	if err != nil {
		return "", fmt.Errorf("files source: version of %s: %w", path, err)
	}
	return fmt.Sprintf("size=%d,mtime=%d", st.Size(), st.ModTime().UnixNano()), nil
}

// imageSplitVersion hashes the versions of the images split s reads.
func imageSplitVersion(o FilesOptions, s Split) (string, error) {
	imgs, err := classImages(o.access(), s.Path)
	if err != nil {
		return "", fmt.Errorf("files source: version of split %d: %w", s.ID, err)
	}
	if s.Start < 0 || s.End < s.Start || s.End > int64(len(imgs)) {
		return "", fmt.Errorf("files source: version of split %d: images [%d, %d) of %s, which now holds %d", s.ID, s.Start, s.End, s.Path, len(imgs))
	}
	h := sha256.New()
	for _, p := range imgs[s.Start:s.End] {
		v, err := fileVersion(o.access(), p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%s\x00", p, v)
	}
	return "images=" + hex.EncodeToString(h.Sum(nil)[:16]), nil
}
