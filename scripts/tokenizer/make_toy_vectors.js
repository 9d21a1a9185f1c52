// Reference ids of a zaya-trained tokenizer.json (tests/fixtures/tokenizer/toy_tokenizer.json) from
// the JavaScript tokenizer (transformers.js as a GemmaTokenizer), on the first N corpus documents:
// shows that tokenizers written by `zaya tokenizer-train` load and encode the same elsewhere.
// Usage: NODE_PATH=… node make_toy_vectors.js TOKENIZER_JSON CORPUS_JSONL N OUT_BIN
"use strict";
const fs = require("fs");
const { TokenizerLoader } = require("@lenml/tokenizers");

const [tokPath, corpusPath, n, out] = process.argv.slice(2);
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(tokPath, "utf8")),
  tokenizerConfig: { tokenizer_class: "GemmaTokenizer", bos_token: "<bos>", eos_token: "<eos>",
                     pad_token: "<pad>", unk_token: "<unk>", clean_up_tokenization_spaces: false },
});
const docs = fs.readFileSync(corpusPath, "utf8").split("\n").filter((l) => l.length)
                 .slice(0, Number(n)).map((l) => JSON.parse(l));
const ids = [];
for (const d of docs) {
  const e = tok.encode(d, { add_special_tokens: false });
  ids.push(e.length, ...e);
}
fs.writeFileSync(out, Buffer.from(new Uint32Array(ids).buffer));
console.log(`${docs.length} documents, ${ids.length - docs.length} tokens`);
