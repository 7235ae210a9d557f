package formats

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// LineIndex is the element index of a lines or JSON-lines file for
// deterministic order (docs/jobs/deterministic-order.md): how many lines
// it has and where lines First, First+Every, First+2·Every… start, so a
// block of Every lines is one ranged read. Blocks are cut in the
// dataset's global numbering of elements, which runs on across files: a
// file whose first line has global id g is indexed with First = (Every −
// g mod Every) mod Every, so its offsets are those of the blocks'
// starts. A line is what the lines reader reads: bytes up to
// and including '\n', or a last unterminated run of bytes; its address is
// its number in the file, also when the reader yields nothing for it (a
// blank JSON line, an invalid line skipped), which is a filter's drop.
// Offsets[j] is the byte offset of line First + j·Every.
type LineIndex struct {
	Lines   int64
	First   int64
	Every   int64
	Offsets []int64
}

// MaxLineIndexOffsets bounds the offsets of one file's index (8 bytes
// each): with Every = 4,096, over 68 billion lines.
const MaxLineIndexOffsets = 1 << 24

// lineIndexBuffer is the scan's read size.
const lineIndexBuffer = 1 << 20

// ErrLineIndex: an index that cannot be built as asked.
var ErrLineIndex = errors.New("formats: line index")

// BuildLineIndex scans r once (sequentially, lineIndexBuffer at a time)
// and indexes lines first, first+every, first+2·every…
func BuildLineIndex(r io.Reader, first, every int64) (LineIndex, error) {
	if every <= 0 || first < 0 || first >= every {
		return LineIndex{}, fmt.Errorf("%w: every %d lines from line %d", ErrLineIndex, every, first)
	}
	x := LineIndex{First: first, Every: every}
	buf := make([]byte, lineIndexBuffer)
	var off int64   // file offset of buf[0]
	atStart := true // the next byte starts a line
	var next int64  // the line number of the next line to start
	for {
		n, err := r.Read(buf)
		b := buf[:n]
		for i := 0; i < len(b); {
			if atStart {
				if next >= first && (next-first)%every == 0 {
					if len(x.Offsets) >= MaxLineIndexOffsets {
						return LineIndex{}, fmt.Errorf("%w: more than %d offsets (every %d lines)", ErrLineIndex, MaxLineIndexOffsets, every)
					}
					x.Offsets = append(x.Offsets, off+int64(i))
				}
				next++
				atStart = false
			}
			j := bytes.IndexByte(b[i:], '\n')
			if j < 0 {
				break
			}
			i += j + 1
			atStart = true
		}
		off += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return LineIndex{}, err
		}
	}
	x.Lines = next
	return x, nil
}
