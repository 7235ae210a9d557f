package fn

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/feedmesh/feedmesh/pipeline/objstore"
	"github.com/feedmesh/feedmesh/tensor"
)

// MaxTokenizerBytes bounds a tokenizer file (Llama 3's tokenizer.json is
// about 9 MB), after decompression.
const MaxTokenizerBytes = 256 << 20

// tokenizeBPE encodes a bytes scalar with a Hugging Face tokenizer.json of
// byte-level BPE: int32 [n]. The file is opened through files (nil: the
// args are only checked).
func tokenizeBPE(files *objstore.Access, a Args) (MapFn, error) {
	in, out, path, err := tokenizerArgs(a)
	if err != nil {
		return nil, argError("tokenize_bpe", err)
	}
	if files == nil {
		return unopened("tokenize_bpe"), nil
	}
	m, err := loadTokenizer(files, path, "", loadHFTokenizer)
	if err != nil {
		return nil, argError("tokenize_bpe", fmt.Errorf("tokenizer: %w", err))
	}
	return bpeMapFn(m, in, out), nil
}

func tokenizerArgs(a Args) (in, out, path string, err error) {
	if in, out, err = textToTokensArgs(a, "tokenizer"); err != nil {
		return
	}
	if _, ok := a["tokenizer"]; !ok {
		err = errors.New("tokenizer: required (path of the tokenizer file)")
		return
	}
	path, err = stringArg(a, "tokenizer", "")
	return
}

// unopened is the function of a spec that was only checked: its file was
// not opened, so it cannot run.
func unopened(name string) MapFn {
	return func(*FnContext, tensor.Element) (tensor.Element, error) {
		return tensor.Element{}, fmt.Errorf("%s: its file was not opened (the spec was only checked, not opened)", name)
	}
}

func bpeMapFn(m *bpeModel, in, out string) MapFn {
	return func(_ *FnContext, e tensor.Element) (tensor.Element, error) {
		t, err := input(e, in)
		if err != nil {
			return e, err
		}
		text, err := bytesScalar(t)
		if err != nil {
			return e, err
		}
		ids := m.encode(make([]int32, 0, len(text)/3+1), text)
		data := make([]byte, 4*len(ids))
		for i, id := range ids {
			binary.LittleEndian.PutUint32(data[4*i:], uint32(id))
		}
		return with(e, tensor.Tensor{Name: out, DType: tensor.Int32, Shape: []int64{int64(len(ids))}, Data: data}), nil
	}
}

// Tokenizers are loaded once per process and path: every spec, op and
// parallel worker naming the same file (unchanged: same size and
// modification time) shares one model.
var tokenizers = struct {
	sync.Mutex
	m map[tokenizerKey]*tokenizerEntry
}{m: map[tokenizerKey]*tokenizerEntry{}}

type tokenizerKey struct {
	path    string
	size    int64
	mtime   int64  // local files
	version string // objects: the ETag
	variant string // what else the model depends on (tiktoken's encoding)
}

type tokenizerEntry struct {
	once sync.Once
	m    *bpeModel
	err  error
}

// loadTokenizer loads the tokenizer file at path (local, or an object
// URL) through files, once per process and file version: the model of
// every spec naming the same file, unchanged, is shared. The file is
// opened through the policy each time (a process may run specs for
// readers with different policies); the key is what it resolved to.
func loadTokenizer(files *objstore.Access, path, variant string, load func(path string, data []byte) (*bpeModel, error)) (*bpeModel, error) {
	if objstore.IsRemote(path) {
		return loadRemote(files, path, variant, load)
	}
	f, err := files.OpenFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory", path)
	}
	abs, err := filepath.Abs(f.Name()) // the file it resolved to
	if err != nil {
		return nil, err
	}
	k := tokenizerKey{path: abs, size: st.Size(), mtime: st.ModTime().UnixNano(), variant: variant}
	return loadOnce(k, func() ([]byte, error) { return readTokenizer(path, f) }, load)
}

// loadOnce loads the tokenizer of key k once per process: the first
// caller reads and parses it, the others wait for its result.
func loadOnce(k tokenizerKey, read func() ([]byte, error), load func(path string, data []byte) (*bpeModel, error)) (*bpeModel, error) {
	tokenizers.Lock()
	e := tokenizers.m[k]
	if e == nil {
		e = &tokenizerEntry{}
		tokenizers.m[k] = e
	}
	tokenizers.Unlock()
	e.once.Do(func() {
		var data []byte
		if data, e.err = read(); e.err == nil {
			e.m, e.err = load(k.path, data)
		}
	})
	return e.m, e.err
}

// loadRemote loads a tokenizer from object storage (s3:// or https://)
// through files (a named store, an allowed host; in a user's own process,
// also the environment's S3), once per object version.
func loadRemote(files *objstore.Access, path, variant string, load func(path string, data []byte) (*bpeModel, error)) (*bpeModel, error) {
	ctx, cancel := context.WithTimeout(context.Background(), remoteTokenizerTimeout)
	defer cancel()
	f, err := files.Open(ctx, path, objstore.Config{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	k := tokenizerKey{path: path, size: f.Size(), variant: variant}
	if v, ok := f.(objstore.Versioned); ok {
		k.version = v.Version()
	}
	return loadOnce(k, func() ([]byte, error) { return readTokenizer(path, io.NewSectionReader(f, 0, f.Size())) }, load)
}

// remoteTokenizerTimeout bounds the opening of a tokenizer object (its
// requests are retried within it).
const remoteTokenizerTimeout = 2 * time.Minute

// readTokenizer reads a tokenizer's bytes from f, gunzipping them when
// path ends in .gz, up to MaxTokenizerBytes.
func readTokenizer(path string, f io.Reader) ([]byte, error) {
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		r = zr
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxTokenizerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxTokenizerBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxTokenizerBytes)
	}
	return data, nil
}

// hfTokenizer is the part of a Hugging Face tokenizer.json that byte-level
// BPE needs. Fields whose value changes the encoding are decoded so that
// an unsupported value is refused rather than ignored.
type hfTokenizer struct {
	AddedTokens []struct {
		ID         int64  `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
	} `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Model        struct {
		Type                    string            `json:"type"`
		Vocab                   map[string]int64  `json:"vocab"`
		Merges                  []json.RawMessage `json:"merges"`
		Dropout                 *float64          `json:"dropout"`
		UnkToken                *string           `json:"unk_token"`
		ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
		ByteFallback            bool              `json:"byte_fallback"`
		IgnoreMerges            bool              `json:"ignore_merges"`
	} `json:"model"`
}

// hfPre is a pre-tokenizer's configuration: ByteLevel, Split or Sequence.
type hfPre struct {
	Type           string `json:"type"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
	Pattern        struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior      string            `json:"behavior"`
	Invert        bool              `json:"invert"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
}

// splitPatterns are the Split regular expressions tokenize_bpe knows, each
// implemented by hand (Go's regexp has no lookahead).
var splitPatterns = map[string]func([]byte, func([]byte)){
	patternGPT2:   splitGPT2,
	patternCL100K: splitCL100K,
	patternO200K:  splitO200K,
}

// hfPreTokenizer returns the splitter of the two layouts byte-level BPE
// files use: ByteLevel with its GPT-2 regex (GPT-2, RoBERTa), or a
// Sequence of a Split by a known pattern then ByteLevel without regex
// (Llama 3, tiktoken conversions).
func hfPreTokenizer(raw json.RawMessage) (func([]byte, func([]byte)), error) {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...))
	}
	var p hfPre
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, bad("pre_tokenizer", "%s is not supported (want ByteLevel, or a Sequence of Split and ByteLevel)", clip(raw))
	}
	byteLevel := func(p hfPre, raw json.RawMessage, field string, regex bool) error {
		if p.Type != "ByteLevel" {
			return bad(field, "%s is not supported (want {\"type\": \"ByteLevel\"})", clip(raw))
		}
		if p.AddPrefixSpace {
			return bad(field+".add_prefix_space", "true is not supported")
		}
		if got := p.UseRegex == nil || *p.UseRegex; got != regex {
			return bad(field+".use_regex", "%v is not supported here (want %v)", got, regex)
		}
		return nil
	}
	switch p.Type {
	case "ByteLevel":
		if err := byteLevel(p, raw, "pre_tokenizer", true); err != nil {
			return nil, err
		}
		return splitGPT2, nil
	case "Sequence":
		if len(p.PreTokenizers) != 2 {
			return nil, bad("pre_tokenizer.pretokenizers", "%d steps are not supported (want Split, then ByteLevel)", len(p.PreTokenizers))
		}
		var sp, bl hfPre
		if json.Unmarshal(p.PreTokenizers[0], &sp) != nil || sp.Type != "Split" {
			return nil, bad("pre_tokenizer.pretokenizers[0]", "%s is not supported (want a Split)", clip(p.PreTokenizers[0]))
		}
		if sp.Pattern.Regex == nil {
			return nil, bad("pre_tokenizer.pretokenizers[0].pattern", "want a Regex")
		}
		split, ok := splitPatterns[*sp.Pattern.Regex]
		if !ok {
			return nil, bad("pre_tokenizer.pretokenizers[0].pattern.Regex", "%q is not a pattern tokenize_bpe implements (GPT-2's, cl100k's / Llama 3's and o200k's are)", clip([]byte(*sp.Pattern.Regex)))
		}
		if sp.Behavior != "Isolated" || sp.Invert {
			return nil, bad("pre_tokenizer.pretokenizers[0]", "behavior %q, invert %v is not supported (want Isolated, false)", sp.Behavior, sp.Invert)
		}
		if json.Unmarshal(p.PreTokenizers[1], &bl) != nil {
			return nil, bad("pre_tokenizer.pretokenizers[1]", "%s is not supported", clip(p.PreTokenizers[1]))
		}
		if err := byteLevel(bl, p.PreTokenizers[1], "pre_tokenizer.pretokenizers[1]", false); err != nil {
			return nil, err
		}
		return split, nil
	}
	return nil, bad("pre_tokenizer", "%s is not supported (want ByteLevel, or a Sequence of Split and ByteLevel)", clip(raw))
}

// loadHFTokenizer builds a model from a tokenizer.json. Errors name the
// file and the field.
func loadHFTokenizer(path string, data []byte) (*bpeModel, error) {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%s: %s: %s", path, field, fmt.Sprintf(format, args...))
	}
	var tj hfTokenizer
	if err := json.Unmarshal(data, &tj); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("%s: offset %d: not valid JSON: %v", path, se.Offset, err)
		case errors.As(err, &te):
			return nil, fmt.Errorf("%s: %s: offset %d: want %s, have JSON %s", path, te.Field, te.Offset, te.Type, te.Value)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	md := &tj.Model
	switch {
	case md.Type != "BPE":
		return nil, bad("model.type", "%q is not supported (want \"BPE\", byte-level)", md.Type)
	case md.Dropout != nil && *md.Dropout != 0:
		return nil, bad("model.dropout", "%v is not supported (want null)", *md.Dropout)
	case md.ContinuingSubwordPrefix != nil && *md.ContinuingSubwordPrefix != "":
		return nil, bad("model.continuing_subword_prefix", "%q is not supported (byte-level BPE has none)", *md.ContinuingSubwordPrefix)
	case md.EndOfWordSuffix != nil && *md.EndOfWordSuffix != "":
		return nil, bad("model.end_of_word_suffix", "%q is not supported (byte-level BPE has none)", *md.EndOfWordSuffix)
	case md.ByteFallback:
		return nil, bad("model.byte_fallback", "true is not supported (a SentencePiece-style BPE, not byte-level)")
	case len(md.Vocab) == 0:
		return nil, bad("model.vocab", "missing or empty")
	}
	if n := bytes.TrimSpace(tj.Normalizer); len(n) > 0 && string(n) != "null" {
		return nil, bad("normalizer", "%s is not supported (want null)", clip(n))
	}
	split, err := hfPreTokenizer(tj.PreTokenizer)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m := &bpeModel{merges: make(map[uint64]bpeMerge, len(md.Merges)), vocab: make(map[string]int32, len(md.Vocab)), ignoreMerges: md.IgnoreMerges, split: split}
	for tok, id := range md.Vocab {
		raw, ok := unByteLevel(tok)
		if !ok {
			return nil, bad("model.vocab", "token %q is not byte-level (a character outside GPT-2's byte-to-unicode map)", tok)
		}
		if id < 0 || id > 1<<31-1 {
			return nil, bad("model.vocab", "token %q: id %d out of int32 range", tok, id)
		}
		m.vocab[raw] = int32(id)
	}
	for b := 0; b < 256; b++ {
		id, ok := m.vocab[string([]byte{byte(b)})]
		if !ok {
			return nil, bad("model.vocab", "no token for byte 0x%02x (byte-level BPE needs all 256)", b)
		}
		m.byteID[b] = id
	}
	for i, raw := range md.Merges {
		l, r, err := parseMerge(raw)
		if err != nil {
			return nil, bad(fmt.Sprintf("model.merges[%d]", i), "%v", err)
		}
		lb, ok1 := unByteLevel(l)
		rb, ok2 := unByteLevel(r)
		lid, ok3 := m.vocab[lb]
		rid, ok4 := m.vocab[rb]
		id, ok5 := m.vocab[lb+rb]
		if !(ok1 && ok2 && ok3 && ok4 && ok5) {
			return nil, bad(fmt.Sprintf("model.merges[%d]", i), "%q + %q: a part or the merged token is not in model.vocab", l, r)
		}
		k := pairKey(lid, rid)
		if _, dup := m.merges[k]; !dup {
			m.merges[k] = bpeMerge{rank: int32(i), id: id}
		}
	}
	for i, at := range tj.AddedTokens {
		field := fmt.Sprintf("added_tokens[%d]", i)
		switch {
		case at.Content == "":
			return nil, bad(field+".content", "empty")
		case at.SingleWord || at.LStrip || at.RStrip:
			return nil, bad(field, "single_word, lstrip and rstrip are not supported (want false)")
		case at.ID < 0 || at.ID > 1<<31-1:
			return nil, bad(field+".id", "%d out of int32 range", at.ID)
		}
		m.special.add(at.Content, int32(at.ID))
	}
	return m, nil
}

// parseMerge reads a merge as "left right" (older files) or ["left",
// "right"] (tokenizers ≥ 0.20).
func parseMerge(raw json.RawMessage) (string, string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		l, r, ok := strings.Cut(s, " ")
		if !ok || l == "" || r == "" || strings.Contains(r, " ") {
			return "", "", fmt.Errorf("%q: want two tokens separated by one space", s)
		}
		return l, r, nil
	}
	var p []string
	if err := json.Unmarshal(raw, &p); err != nil || len(p) != 2 || p[0] == "" || p[1] == "" {
		return "", "", fmt.Errorf("%s: want \"left right\" or [\"left\", \"right\"]", clip(raw))
	}
	return p[0], p[1], nil
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

// byteToRune is GPT-2's byte-to-unicode map: printable bytes stand for
// themselves, the others for code points from U+0100 up, so that every
// token is printable text in vocab files.
var byteToRune, runeToByte = func() (b2r [256]rune, r2b map[rune]byte) {
	r2b = make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
		r2b[b2r[b]] = byte(b)
	}
	return
}()

// unByteLevel turns a token of a vocab file into its bytes.
func unByteLevel(s string) (string, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		b, ok := runeToByte[r]
		if !ok {
			return "", false
		}
		out = append(out, b)
	}
	return string(out), true
}
