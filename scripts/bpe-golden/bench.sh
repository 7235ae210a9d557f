#!/usr/bin/env bash
# tokenize_bpe (Go) vs gpt-tokenizer (node) tokens/s on the same text, one
# core each, one after the other in the same run: GPT-2 (r50k_base) and
# cl100k_base.
#   scripts/bpe-golden/bench.sh NODE_DIR [TEXT_FILE]
# NODE_DIR: where `npm install gpt-tokenizer@4.0.0` was run. TEXT_FILE
# defaults to the repository's Markdown files concatenated (English prose
# with code and tables), special-token strings removed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
node_dir=$1
text=${2:-}
if [ -z "$text" ]; then
  text=$(mktemp)
  trap 'rm -f "$text"' EXIT
  # Special-token strings are removed: gpt-tokenizer refuses them in text.
  (cd "$repo" && git ls-files '*.md' | sort | xargs cat) | sed 's/<|[a-z_]*|>//g' > "$text"
fi
cp "$repo/scripts/bpe-golden/bench.mjs" "$node_dir/"
(cd "$node_dir" && node bench.mjs "$text" 3)
(cd "$repo/pipeline/fn" && FEEDMESH_BPE_BENCH_TEXT=$text GOMAXPROCS=1 \
  go test -run XXX -bench BenchmarkTokenizeBPE -benchtime 3s -count 1 .) | grep -E 'Benchmark|tokens'
