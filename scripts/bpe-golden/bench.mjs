// Tokens per second of gpt-tokenizer (r50k_base = GPT-2, and cl100k_base) on a text file,
// cut into paragraphs as BenchmarkTokenizeBPE cuts it. Run from the
// directory where gpt-tokenizer is installed: node bench.mjs FILE [SECONDS]
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(path.join(process.cwd(), "noop.js"));
const text = fs.readFileSync(process.argv[2], "utf8");
const seconds = Number(process.argv[3] || 3);
const paras = text.split(/(?<=\n\n)/);
for (const enc of ["r50k_base", "cl100k_base"]) {
  const { encode } = require(`gpt-tokenizer/cjs/encoding/${enc}`);
  let tokens = 0;
  for (const p of paras) tokens += encode(p).length; // warm up (JIT, merge cache)
  tokens = 0;
  const t0 = process.hrtime.bigint();
  let elapsed = 0;
  let passes = 0;
  while (elapsed < seconds) {
    for (const p of paras) tokens += encode(p).length;
    passes++;
    elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
  }
  console.log(JSON.stringify({ impl: `gpt-tokenizer ${enc} (node ${process.version})`, bytes: Buffer.byteLength(text), passes, tokens_per_s: Math.round(tokens / elapsed) }));
}
