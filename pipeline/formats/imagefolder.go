package formats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/tensor"
)

// An image folder is torchvision's ImageFolder layout: root/<class>/…/<image>.
// Classes are root's subdirectories in sorted order and an image's label
// is its class's index; images are the files under a class directory, at
// any depth, with an image extension (ImageExtensions), in lexical order of
// their path. Each class is cut into splits of ImageFolderSplitSize images
// (Split.Path is the class directory, [Start, End) image indices in it),
// so a split is opened by listing one class directory, not the whole tree.
// The tree must not change while a dataset reads it.

// ImageFolderSplitSize is the number of images per split of image_folder.
const ImageFolderSplitSize = 1024

// ImageExtensions are the file extensions image_folder reads (compared
// without regard to case), torchvision's list plus .gif.
var ImageExtensions = []string{".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp", ".gif"}

// imageFolderRoot is the one directory of an image_folder source.
func imageFolderRoot(o FilesOptions) (string, error) {
	if len(o.Paths) != 1 {
		return "", fmt.Errorf("paths: image_folder takes exactly one root directory, got %d paths", len(o.Paths))
	}
	// The policy sees the path as given (a `..` in it is its to refuse).
	st, err := o.access().Stat(o.Paths[0])
	root := filepath.Clean(o.Paths[0])
	if err != nil {
		return "", fmt.Errorf("paths[0]: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("paths[0]: %s is not a directory (image_folder reads root/<class>/<image>)", root)
	}
	return root, nil
}

// imageClasses lists root's class directories, sorted (hidden ones, whose
// name starts with a dot, are not classes).
func imageClasses(acc *objstore.Access, root string) ([]string, error) {
	ents, err := acc.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			st, err := acc.Stat(filepath.Join(root, e.Name()))
			if errors.Is(err, objstore.ErrNotAllowed) {
				return nil, err
			}
			isDir = err == nil && st.IsDir()
		}
		if isDir {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

func isImage(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	for _, e := range ImageExtensions {
		if ext == e {
			return true
		}
	}
	return false
}

// classImages lists the images under a class directory, in lexical order
// of their path (filepath.WalkDir's order), skipping hidden files and
// directories.
func classImages(acc *objstore.Access, dir string) ([]string, error) {
	var out []string
	err := acc.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !isImage(p) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			st, err := acc.Stat(p)
			if errors.Is(err, objstore.ErrNotAllowed) {
				return err
			}
			if err != nil || !st.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// imageFolderSplits lists the splits of an image_folder source.
func imageFolderSplits(o FilesOptions) ([]Split, error) {
	root, err := imageFolderRoot(o)
	if err != nil {
		return nil, err
	}
	classes, err := imageClasses(o.access(), root)
	if err != nil {
		return nil, err
	}
	if len(classes) == 0 {
		return nil, fmt.Errorf("%s: no class directories (image_folder reads root/<class>/<image>)", root)
	}
	var out []Split
	for _, c := range classes {
		dir := filepath.Join(root, c)
		imgs, err := classImages(o.access(), dir)
		if err != nil {
			return nil, err
		}
		for i := 0; i < len(imgs); i += ImageFolderSplitSize {
			out = append(out, Split{ID: int64(len(out)), Path: dir, Start: int64(i), End: int64(min(i+ImageFolderSplitSize, len(imgs)))})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no images in its %d class directories (extensions: %s)", root, len(classes), strings.Join(ImageExtensions, " "))
	}
	return out, nil
}

type imageFolderIter struct {
	acc   *objstore.Access
	paths []string
	label int64
	max   int64
	i     int
}

func openImageFolder(o FilesOptions, s Split) (Iterator, error) {
	root, err := imageFolderRoot(o)
	if err != nil {
		return nil, err
	}
	if filepath.Dir(filepath.Clean(s.Path)) != root {
		return nil, fmt.Errorf("split %d: %s is not a class directory of %s", s.ID, s.Path, root)
	}
	classes, err := imageClasses(o.access(), root)
	if err != nil {
		return nil, err
	}
	name := filepath.Base(s.Path)
	label := sort.SearchStrings(classes, name)
	if label == len(classes) || classes[label] != name {
		return nil, fmt.Errorf("split %d: class directory %s has gone", s.ID, s.Path)
	}
	imgs, err := classImages(o.access(), s.Path)
	if err != nil {
		return nil, err
	}
	if s.Start < 0 || s.End < s.Start || s.End > int64(len(imgs)) {
		return nil, fmt.Errorf("split %d: images [%d, %d) of %s, which now holds %d: the folder changed since its splits were listed", s.ID, s.Start, s.End, s.Path, len(imgs))
	}
	return &imageFolderIter{acc: o.access(), paths: imgs[s.Start:s.End], label: int64(label), max: o.MaxRecordBytes}, nil
}

func (it *imageFolderIter) Next(ctx context.Context) (tensor.Element, error) {
	if err := ctx.Err(); err != nil {
		return tensor.Element{}, err
	}
	if it.i >= len(it.paths) {
		return tensor.Element{}, io.EOF
	}
	p := it.paths[it.i]
	it.i++
	data, err := readBounded(it.acc, p, it.max)
	if err != nil {
		return tensor.Element{}, err
	}
	return tensor.Element{Tensors: []tensor.Tensor{
		tensor.BytesScalar("image", data),
		tensor.ScalarInt64("label", it.label),
		tensor.BytesScalar("path", []byte(p)),
	}}, nil
}

// readBounded reads a whole file of at most max bytes.
func readBounded(acc *objstore.Access, p string, max int64) ([]byte, error) {
	f, err := acc.OpenFile(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// One allocation of the file's size (as os.ReadFile), not io.ReadAll's
	// doublings from 512 bytes: images are read at thousands a second.
	size := int64(512)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = min(st.Size(), max) + 1
	}
	data := make([]byte, 0, size)
	for int64(len(data)) <= max {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := f.Read(data[len(data):min(int64(cap(data)), max+1)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
	}
	if int64(len(data)) > max {
		return nil, &RecordError{Path: p, Offset: -1, Err: ErrRecordTooLarge, Msg: fmt.Sprintf("file exceeds max_record_bytes (%d)", max)}
	}
	return data, nil
}

func (it *imageFolderIter) Close() error { return nil }
