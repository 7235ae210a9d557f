package fn

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
)

// tiktokenEncodings are the encodings tokenize_tiktoken knows: the split
// pattern and the special tokens tiktoken gives each (a rank file holds
// neither). o200k_base is not among them: its pattern is not implemented.
var tiktokenEncodings = map[string]struct {
	split   func([]byte, func([]byte))
	special map[string]int32
}{
	"r50k_base":   {splitGPT2, map[string]int32{"<|endoftext|>": 50256}},
	"p50k_base":   {splitGPT2, map[string]int32{"<|endoftext|>": 50256}},
	"cl100k_base": {splitCL100K, map[string]int32{"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}},
	"o200k_base":  {splitO200K, map[string]int32{"<|endoftext|>": 199999, "<|endofprompt|>": 200018}},
}

// maxTiktokenRank bounds a rank (tokBytes is indexed by it).
const maxTiktokenRank = 1 << 24

// tokenizeTiktoken encodes a bytes scalar as OpenAI's tiktoken does, from a
// rank file (`cl100k_base.tiktoken`: one base64 token and its rank per
// line) and the encoding's name: int32 [n].
func tokenizeTiktoken(files *objstore.Access, a Args) (MapFn, error) {
	if err := a.Known("tensor", "output", "tokenizer", "encoding"); err != nil {
		return nil, argError("tokenize_tiktoken", err)
	}
	enc, err := stringArg(a, "encoding", "")
	if _, ok := a["encoding"]; !ok {
		err = fmt.Errorf("encoding: required (one of %s)", strings.Join(tiktokenEncodingNames(), ", "))
	}
	if err != nil {
		return nil, argError("tokenize_tiktoken", err)
	}
	e, ok := tiktokenEncodings[enc]
	if !ok {
		return nil, argError("tokenize_tiktoken", fmt.Errorf("encoding: %q is not supported (known: %s)", enc, strings.Join(tiktokenEncodingNames(), ", ")))
	}
	sub := Args{}
	for k, v := range a {
		if k != "encoding" {
			sub[k] = v
		}
	}
	in, out, path, err := tokenizerArgs(sub)
	if err != nil {
		return nil, argError("tokenize_tiktoken", err)
	}
	if files == nil {
		return unopened("tokenize_tiktoken"), nil
	}
	m, err := loadTokenizer(files, path, enc, func(p string, data []byte) (*bpeModel, error) {
		return loadTiktoken(p, data, e.split, e.special)
	})
	if err != nil {
		return nil, argError("tokenize_tiktoken", fmt.Errorf("tokenizer: %w", err))
	}
	return bpeMapFn(m, in, out), nil
}

func tiktokenEncodingNames() []string { return sortedKeys(tiktokenEncodings) }

// loadTiktoken reads a rank file; errors name the file and line.
func loadTiktoken(path string, data []byte, split func([]byte, func([]byte)), special map[string]int32) (*bpeModel, error) {
	m := &bpeModel{ranks: map[string]int32{}, ignoreMerges: true, split: split}
	lineOf := map[int32]int{}
	maxRank := int32(0)
	line := 0
	for len(data) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			l, data = data, nil
		}
		l = bytes.TrimSuffix(l, []byte("\r"))
		if len(l) == 0 {
			continue
		}
		tok, rank, ok := bytes.Cut(l, []byte(" "))
		if !ok {
			return nil, fmt.Errorf("%s:%d: want a base64 token, a space and its rank", path, line)
		}
		b, err := base64.StdEncoding.DecodeString(string(tok))
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("%s:%d: token %q is not base64 of a non-empty byte string", path, line, clip(tok))
		}
		r, err := strconv.ParseInt(string(rank), 10, 32)
		if err != nil || r < 0 || r >= maxTiktokenRank {
			return nil, fmt.Errorf("%s:%d: rank %q is not an integer in [0, %d)", path, line, clip(rank), maxTiktokenRank)
		}
		if _, dup := m.ranks[string(b)]; dup {
			return nil, fmt.Errorf("%s:%d: token %q listed twice", path, line, tok)
		}
		if _, dup := lineOf[int32(r)]; dup {
			return nil, fmt.Errorf("%s:%d: rank %d given to two tokens (also on line %d)", path, line, r, lineOf[int32(r)])
		}
		m.ranks[string(b)] = int32(r)
		lineOf[int32(r)] = line
		maxRank = max(maxRank, int32(r))
	}
	// Ranks index a table, so they must be about as many as the tokens
	// (tiktoken's files number them densely from 0).
	if int(maxRank) > 2*len(m.ranks)+256 {
		return nil, fmt.Errorf("%s:%d: rank %d, but only %d tokens: ranks must be dense", path, lineOf[maxRank], maxRank, len(m.ranks))
	}
	m.tokBytes = make([][]byte, maxRank+1)
	for tok, r := range m.ranks {
		m.tokBytes[r] = []byte(tok)
	}
	for b := 0; b < 256; b++ {
		r, ok := m.ranks[string([]byte{byte(b)})]
		if !ok {
			return nil, fmt.Errorf("%s: no token for byte 0x%02x (a byte-level rank file has all 256)", path, b)
		}
		m.byteID[b] = r
	}
	m.vocab = m.ranks // whole pieces are looked up first, as tiktoken does
	names := make([]string, 0, len(special))
	for s := range special {
		names = append(names, s)
	}
	sort.Strings(names)
	for _, s := range names {
		m.special.add(s, special[s])
	}
	return m, nil
}
