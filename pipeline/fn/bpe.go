package fn

import (
	"container/heap"
	"sync"
)

// bpeModel is a byte-level BPE vocabulary: token ids of byte strings and
// the merge table, in raw bytes (the byte-to-unicode mapping of the file
// format is undone when loading).
type bpeModel struct {
	// byteID is the id of each single byte's token.
	byteID [256]int32
	// merges maps a pair of ids (left<<32 | right) to the merge's rank and
	// the id of the merged token.
	merges map[uint64]bpeMerge
	// vocab maps a token's bytes to its id; used whole-word when
	// ignoreMerges is set (Llama 3's tokenizer.json).
	vocab        map[string]int32
	ignoreMerges bool
	// special are the added tokens matched in the text before it is split.
	special specialMatcher
	// split is the pre-tokenizer: it cuts text into the pieces merged
	// separately.
	split func(b []byte, f func(piece []byte))
	// tokBytes and ranks are set for a tiktoken rank file: there the
	// merge of two tokens is the token of their concatenated bytes, ranked
	// by its own rank (which is its id), so no merge table is needed.
	tokBytes [][]byte
	ranks    map[string]int32

	cache wordCache
}

type bpeMerge struct{ rank, id int32 }

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// pair returns the merge of the adjacent tokens a and b, if any.
func (m *bpeModel) pair(a, b int32) (bpeMerge, bool) {
	if m.tokBytes == nil {
		mg, ok := m.merges[pairKey(a, b)]
		return mg, ok
	}
	x, y := m.tokBytes[a], m.tokBytes[b]
	var buf [64]byte
	k := buf[:0]
	if len(x)+len(y) > len(buf) {
		k = make([]byte, 0, len(x)+len(y))
	}
	k = append(append(k, x...), y...)
	r, ok := m.ranks[string(k)]
	return bpeMerge{rank: r, id: r}, ok
}

// longWord is the length above which a word is merged with a heap
// (O(n log n)) instead of by rescanning (O(n²), faster for short words).
const longWord = 48

// encode appends the ids of text to ids: added tokens first, then the
// pre-tokenizer's pieces, each merged on its own.
func (m *bpeModel) encode(ids []int32, text []byte) []int32 {
	emit := func(piece []byte) { ids = m.encodeWord(ids, piece) }
	m.special.split(text, func(seg []byte, id int32) {
		if id >= 0 {
			ids = append(ids, id)
			return
		}
		m.split(seg, emit)
	})
	return ids
}

// encodeWord appends the ids of one pre-tokenized piece.
func (m *bpeModel) encodeWord(ids []int32, w []byte) []int32 {
	if len(w) == 1 {
		return append(ids, m.byteID[w[0]])
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[string(w)]; ok {
			return append(ids, id)
		}
	}
	cacheable := len(w) <= maxCachedWord
	if cacheable {
		if got, ok := m.cache.get(w); ok {
			return append(ids, got...)
		}
	}
	start := len(ids)
	for _, c := range w {
		ids = append(ids, m.byteID[c])
	}
	var n int
	if len(w) > longWord {
		n = m.mergeHeap(ids[start:])
	} else {
		n = m.mergeScan(ids[start:])
	}
	ids = ids[:start+n]
	if cacheable {
		m.cache.put(w, ids[start:])
	}
	return ids
}

// mergeScan applies merges to sym in place, lowest rank first (leftmost
// among equals), and returns the new length.
func (m *bpeModel) mergeScan(sym []int32) int {
	for len(sym) > 1 {
		best, at := bpeMerge{rank: -1}, -1
		for i := 0; i+1 < len(sym); i++ {
			if mg, ok := m.pair(sym[i], sym[i+1]); ok && (at < 0 || mg.rank < best.rank) {
				best, at = mg, i
			}
		}
		if at < 0 {
			break
		}
		sym[at] = best.id
		sym = append(sym[:at+1], sym[at+2:]...)
	}
	return len(sym)
}

// mergeHeap is mergeScan for long words: the same merges in the same
// order, with candidate pairs in a heap ordered by (rank, position) and the
// symbols in a linked list.
func (m *bpeModel) mergeHeap(sym []int32) int {
	n := len(sym)
	prev := make([]int, n)
	next := make([]int, n)
	alive := make([]bool, n)
	for i := range sym {
		prev[i], next[i], alive[i] = i-1, i+1, true
	}
	next[n-1] = -1
	h := &pairHeap{}
	push := func(i int) {
		if i < 0 || next[i] < 0 {
			return
		}
		j := next[i]
		if mg, ok := m.pair(sym[i], sym[j]); ok {
			heap.Push(h, pairCand{rank: mg.rank, pos: i, left: sym[i], right: sym[j], id: mg.id})
		}
	}
	for i := 0; i+1 < n; i++ {
		push(i)
	}
	for h.Len() > 0 {
		c := heap.Pop(h).(pairCand)
		i := c.pos
		j := next[i]
		// Stale: a neighbour changed since this pair was pushed.
		if !alive[i] || j < 0 || sym[i] != c.left || sym[j] != c.right {
			continue
		}
		sym[i] = c.id
		alive[j] = false
		next[i] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = i
		}
		push(prev[i])
		push(i)
	}
	out := 0
	for i := 0; i >= 0; i = next[i] {
		sym[out] = sym[i]
		out++
	}
	return out
}

type pairCand struct {
	rank, left, right, id int32
	pos                   int
}

type pairHeap []pairCand

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(a, b int) bool {
	if h[a].rank != h[b].rank {
		return h[a].rank < h[b].rank
	}
	return h[a].pos < h[b].pos
}
func (h pairHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pairCand)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// specialMatcher finds added tokens in text, leftmost and, among those
// starting at the same byte, longest first (as Hugging Face tokenizers'
// added vocabulary does).
type specialMatcher struct {
	// byFirst lists the tokens by their first byte, longest first.
	byFirst [256][]specialToken
}

type specialToken struct {
	text string
	id   int32
}

func (s *specialMatcher) add(text string, id int32) {
	l := s.byFirst[text[0]]
	i := 0
	for i < len(l) && len(l[i].text) >= len(text) {
		i++
	}
	l = append(l, specialToken{})
	copy(l[i+1:], l[i:])
	l[i] = specialToken{text, id}
	s.byFirst[text[0]] = l
}

// split calls f with the text between added tokens (id -1) and with each
// added token's id (seg nil).
func (s *specialMatcher) split(text []byte, f func(seg []byte, id int32)) {
	start := 0
	for i := 0; i < len(text); i++ {
		for _, t := range s.byFirst[text[i]] {
			if len(text)-i >= len(t.text) && string(text[i:i+len(t.text)]) == t.text {
				if i > start {
					f(text[start:i], -1)
				}
				f(nil, t.id)
				i += len(t.text) - 1
				start = i + 1
				break
			}
		}
	}
	if start < len(text) {
		f(text[start:], -1)
	}
}

// maxCachedWord bounds the words the cache keeps; wordCacheShards ×
// wordCacheShardSize bounds how many.
const (
	maxCachedWord      = 64
	wordCacheShards    = 16
	wordCacheShardSize = 4096
)

// wordCache remembers the ids of recent words. Parallel maps share one
// model, so it is sharded by hash; a full shard is emptied (cheaper than
// LRU bookkeeping, and text repeats its frequent words soon enough).
type wordCache struct {
	shards [wordCacheShards]struct {
		sync.Mutex
		m map[string][]int32
	}
}

func (c *wordCache) shard(w []byte) int { return int(fnv1a(w) % wordCacheShards) }

func (c *wordCache) get(w []byte) ([]int32, bool) {
	s := &c.shards[c.shard(w)]
	s.Lock()
	ids, ok := s.m[string(w)]
	s.Unlock()
	return ids, ok
}

func (c *wordCache) put(w []byte, ids []int32) {
	s := &c.shards[c.shard(w)]
	s.Lock()
	if s.m == nil || len(s.m) >= wordCacheShardSize {
		s.m = make(map[string][]int32, 64)
	}
	s.m[string(w)] = append([]int32(nil), ids...)
	s.Unlock()
}
