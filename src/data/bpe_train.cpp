// BPE training (bpe_train.h): counts pre-tokenized words of the input files, then merges the
// most frequent adjacent pair repeatedly (ties by the pair order), writing a Gemma 3-style
// byte-fallback tokenizer.json.
#include "data/bpe_train.h"

#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "core/assert.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/timer.h"

namespace zaya {

using json = nlohmann::json;

namespace {

const char* const kSpecials[] = {"<pad>",  "<eos>",           "<bos>",        "<unk>",
                                 "<mask>", "<start_of_turn>", "<end_of_turn>"};
constexpr int kNumSpecials = 7;
constexpr size_t kBlockBytes = size_t(1) << 20;  // files are read in blocks cut at a newline
constexpr size_t kBatchBlocks = 64;              // blocks counted in parallel at once
const std::string kSpace = "\xE2\x96\x81";       // "▁"

using WordCounts = std::unordered_map<std::string, int64_t>;

// Gemma 3's tokenizer.json around a vocabulary (id order) and merges (token-string pairs).
// Tokens [0, n_added) are added tokens: the first kNumSpecials special; `unused_from` starts the
// <unusedK> padding (also added, as in Gemma 3).
json gemma_style_json(const std::vector<std::string>& vocab,
                      const std::vector<std::pair<std::string, std::string>>& merges,
                      size_t n_added, size_t unused_from) {
  json added = json::array();
  auto add = [&](size_t id) {
    added.push_back({{"id", id},
                     {"content", vocab[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", id < size_t(kNumSpecials)}});
  };
  for (size_t id = 0; id < n_added; ++id) add(id);
  for (size_t id = unused_from; id < vocab.size(); ++id) add(id);
  json v = json::object();
  for (size_t id = 0; id < vocab.size(); ++id) v[vocab[id]] = id;
  json m = json::array();
  for (const auto& [a, b] : merges) m.push_back({a, b});
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", std::move(added)},
      {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}}},
      {"pre_tokenizer",
       {{"type", "Split"},
        {"pattern", {{"String", " "}}},
        {"behavior", "MergedWithPrevious"},
        {"invert", false}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", "<bos>"}, {"type_id", 1}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{"<bos>", {{"id", "<bos>"}, {"ids", {2}}, {"tokens", {"<bos>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}}}}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"ignore_merges", false},
        {"vocab", std::move(v)},
        {"merges", std::move(m)}}}};
}

// Specials, newline runs and byte tokens: the fixed head of every trained vocabulary.
std::vector<std::string> base_vocab() {
  std::vector<std::string> v(kSpecials, kSpecials + kNumSpecials);
  for (int n = 1; n <= kNewlineRuns; ++n) v.push_back(std::string(size_t(n), '\n'));
  for (int b = 0; b < 256; ++b) v.push_back(fmt::format("<0x{:02X}>", b));
  return v;
}
constexpr size_t kNumAdded = kNumSpecials + kNewlineRuns;

// Cuts a BPE piece into training words: a new word starts at every "▁" that follows another
// character, so a run of spaces stays with the word after it.
void count_words(const Tokenizer& skeleton, std::string_view text, WordCounts& counts) {
  skeleton.for_each_piece(text, [&](std::string_view piece) {
    size_t start = 0;
    for (size_t i = 1; i + 3 <= piece.size(); ++i)
      if (piece.compare(i, 3, kSpace) == 0 && !(i >= 3 && piece.compare(i - 3, 3, kSpace) == 0)) {
        ++counts[std::string(piece.substr(start, i - start))];
        start = i;
      }
    ++counts[std::string(piece.substr(start))];
  });
}

// Counts the words of `blocks` on all threads; sums into `total`.
void count_blocks(const Tokenizer& skeleton, const std::vector<std::string>& blocks,
                  WordCounts& total) {
  const int threads = omp_get_max_threads();
  std::vector<WordCounts> local(static_cast<size_t>(threads));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t b = 0; b < int64_t(blocks.size()); ++b)
    count_words(skeleton, blocks[size_t(b)], local[size_t(omp_get_thread_num())]);
  for (WordCounts& l : local)
    for (auto& [w, c] : l) total[w] += c;
}

// Splits a word into UTF-8 characters (an invalid byte is its own "character", never kept).
std::vector<std::string_view> chars_of(std::string_view w) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < w.size();) {
    size_t n = 1;
    const unsigned char c = w[i];
    if (c >= 0xC0) n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    if (i + n > w.size()) n = 1;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(w[i + k]) & 0xC0) != 0x80) n = 1;
    if (n > 1) {  // reject overlong forms, surrogates and code points past U+10FFFF
      uint32_t cp = c & (0x7F >> n);
      for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(w[i + k]) & 0x3F);
      const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
      if (cp < min_cp[n] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) n = 1;
    }
    out.push_back(w.substr(i, n));
    i += n;
  }
  return out;
}

uint64_t pair_key(int32_t a, int32_t b) {
  return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
}

// `source` names the input in the error for an input without text ("a.txt (0 bytes)").
Tokenizer train(const std::function<void(const Tokenizer&, WordCounts&)>& count, int64_t vocab_size,
                const BpeTrainOptions& opt, const std::function<std::string()>& source) {
  ZAYA_CHECK_INPUT(vocab_size >= bpe_min_vocab_size(),
                   "vocab size {} is too small: a trained tokenizer needs at least {} (7 special, "
                   "{} newline and 256 byte tokens, and one more)",
                   vocab_size, bpe_min_vocab_size(), kNewlineRuns);
  Timer timer;
  std::vector<std::string> vocab = base_vocab();
  const Tokenizer skeleton = Tokenizer::from_json(
      gemma_style_json(vocab, {}, kNumAdded, vocab.size()), "tokenizer skeleton");
  WordCounts counts;
  count(skeleton, counts);
  // Nothing to learn from (empty files, only newlines): a tokenizer of byte fallback and unused
  // slots would be written without complaint, so this is an error.
  if (counts.empty())
    fail("no text to train a tokenizer on: {} (empty, or only newlines)", source());
  if (opt.progress)
    log_info("tokenizer-train: {} distinct words ({:.1f}s)", counts.size(), timer.seconds());

  // Words in a fixed order (the hash map's order depends on the thread count).
  std::vector<std::pair<std::string, int64_t>> words(counts.begin(), counts.end());
  counts = {};
  std::sort(words.begin(), words.end());

  // Characters: the most frequent, covering 99.95% of occurrences (at most half the free ids).
  std::unordered_map<std::string, int64_t> char_count;
  int64_t total_chars = 0;
  for (const auto& [w, c] : words)
    for (std::string_view ch : chars_of(w))
      if (ch.size() > 1 || static_cast<unsigned char>(ch[0]) < 0x80) {
        char_count[std::string(ch)] += c;
        total_chars += c;
      }
  std::vector<std::pair<std::string, int64_t>> chars(char_count.begin(), char_count.end());
  std::sort(chars.begin(), chars.end(), [](const auto& x, const auto& y) {
    return x.second != y.second ? x.second > y.second : x.first < y.first;
  });
  const int64_t free_ids = vocab_size - int64_t(vocab.size());
  int64_t keep = opt.max_chars > 0 ? opt.max_chars : free_ids / 2;
  keep = std::min<int64_t>({keep, free_ids, int64_t(chars.size())});
  if (opt.max_chars <= 0) {
    int64_t covered = 0, n = 0;
    while (n < keep && covered < total_chars - total_chars / 2000)
      covered += chars[size_t(n++)].second;
    keep = n;
  }
  std::unordered_map<std::string, int32_t> ids;
  for (size_t i = 0; i < vocab.size(); ++i) ids.emplace(vocab[i], int32_t(i));
  std::vector<int32_t> token_chars(vocab.size(), 1);
  for (int64_t i = 0; i < keep; ++i)
    if (ids.emplace(chars[size_t(i)].first, int32_t(vocab.size())).second) {
      vocab.push_back(chars[size_t(i)].first);
      token_chars.push_back(1);
    }

  // Words as symbol ids (-1: a character left to byte fallback, which never merges).
  struct Word {
    std::vector<int32_t> sym;
    int64_t count;
  };
  std::vector<Word> ws;
  ws.reserve(words.size());
  for (const auto& [w, c] : words) {
    Word word{{}, c};
    for (std::string_view ch : chars_of(w)) {
      auto it = ids.find(std::string(ch));
      word.sym.push_back(it == ids.end() ? -1 : it->second);
    }
    ws.push_back(std::move(word));
  }
  words = {};

  // Pair counts, where each pair occurs, and a max-heap of (count, pair) with lazy updates.
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;
  for (size_t w = 0; w < ws.size(); ++w)
    for (size_t i = 0; i + 1 < ws[w].sym.size(); ++i)
      if (ws[w].sym[i] >= 0 && ws[w].sym[i + 1] >= 0) {
        const uint64_t k = pair_key(ws[w].sym[i], ws[w].sym[i + 1]);
        pair_count[k] += ws[w].count;
        auto& list = where[k];
        if (list.empty() || list.back() != int32_t(w)) list.push_back(int32_t(w));
      }
  struct Entry {
    int64_t count;
    uint64_t pair;
    bool operator<(const Entry& o) const {  // max count first, then the smaller pair
      return count != o.count ? count < o.count : pair > o.pair;
    }
  };
  std::priority_queue<Entry> heap;
  for (const auto& [k, c] : pair_count) heap.push({c, k});

  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<int32_t> seen(ws.size(), -1);  // last merge that touched each word
  std::unordered_map<uint64_t, int64_t> delta;
  while (int64_t(vocab.size()) < vocab_size && !heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    auto pc = pair_count.find(top.pair);
    const int64_t now = pc == pair_count.end() ? 0 : pc->second;
    if (now != top.count) {  // stale: requeue with the current count
      if (now > 0) heap.push({now, top.pair});
      continue;
    }
    if (now < opt.min_frequency) break;
    const int32_t a = int32_t(top.pair >> 32), b = int32_t(top.pair & 0xFFFFFFFFu);
    const int32_t len = token_chars[a] + token_chars[b];
    pc->second = 0;
    if (len > opt.max_token_chars) continue;  // never merged; its count stays 0
    const std::string s = vocab[a] + vocab[b];
    auto [it, fresh] = ids.emplace(s, int32_t(vocab.size()));
    if (fresh) {
      vocab.push_back(s);
      token_chars.push_back(len);
    }
    const int32_t id = it->second;
    merges.emplace_back(vocab[a], vocab[b]);
    const int32_t merge_no = int32_t(merges.size());

    // Rewrite every word holding the pair; collect the pair-count changes.
    delta.clear();
    for (int32_t w : where[top.pair]) {
      if (seen[w] == merge_no) continue;
      seen[w] = merge_no;
      std::vector<int32_t>& sym = ws[w].sym;
      const int64_t c = ws[w].count;
      bool any = false;
      for (size_t i = 0; i + 1 < sym.size(); ++i) {
        if (sym[i] != a || sym[i + 1] != b) continue;
        any = true;
        if (i > 0 && sym[i - 1] >= 0) {
          delta[pair_key(sym[i - 1], a)] -= c;
          delta[pair_key(sym[i - 1], id)] += c;
        }
        if (i + 2 < sym.size() && sym[i + 2] >= 0) {
          delta[pair_key(b, sym[i + 2])] -= c;
          delta[pair_key(id, sym[i + 2])] += c;
        }
        sym[i] = id;
        sym.erase(sym.begin() + ptrdiff_t(i) + 1);
      }
      if (!any) continue;
      for (size_t i = 0; i + 1 < sym.size(); ++i)
        if (sym[i] == id || sym[i + 1] == id) {
          if (sym[i] < 0 || sym[i + 1] < 0) continue;
          auto& list = where[pair_key(sym[i], sym[i + 1])];
          if (list.empty() || list.back() != w) list.push_back(w);
        }
    }
    where.erase(top.pair);
    std::vector<std::pair<uint64_t, int64_t>> changed(delta.begin(), delta.end());
    std::sort(changed.begin(), changed.end());
    for (const auto& [k, d] : changed) {
      if (k == top.pair || d == 0) continue;
      int64_t& cnt = pair_count[k];
      cnt += d;
      if (d > 0) heap.push({cnt, k});
    }
    if (opt.progress && merges.size() % 1000 == 0)
      log_info("tokenizer-train: {} merges, vocabulary {} / {} ({:.1f}s)", merges.size(),
               vocab.size(), vocab_size, timer.seconds());
  }

  const size_t unused_from = vocab.size();
  for (int64_t k = 0; int64_t(vocab.size()) < vocab_size; ++k) {
    std::string name = fmt::format("<unused{}>", k);
    if (ids.emplace(name, int32_t(vocab.size())).second) vocab.push_back(std::move(name));
  }
  if (opt.progress)
    log_info("tokenizer-train: {} tokens ({} characters, {} merges, {} unused) in {:.1f}s",
             vocab.size(), keep, merges.size(), vocab.size() - unused_from, timer.seconds());
  return Tokenizer::from_json(gemma_style_json(vocab, merges, kNumAdded, unused_from),
                              "trained tokenizer");
}

}  // namespace

int64_t bpe_min_vocab_size() {
  return int64_t(kNumAdded) + 256 + 1;
}

Tokenizer train_bpe_on_texts(const std::vector<std::string>& texts, int64_t vocab_size,
                             const BpeTrainOptions& opt) {
  return train(
      [&](const Tokenizer& skeleton, WordCounts& counts) { count_blocks(skeleton, texts, counts); },
      vocab_size, opt, [&] { return fmt::format("the {} text(s)", texts.size()); });
}

Tokenizer train_bpe(const std::vector<std::string>& files, int64_t vocab_size,
                    const BpeTrainOptions& opt) {
  ZAYA_CHECK_INPUT(!files.empty(), "no input files to train a tokenizer on");
  for (const std::string& f : files) {  // fail before any work on a missing file
    std::FILE* fp = std::fopen(f.c_str(), "rb");
    if (!fp) fail("{}: cannot open training text: {}", f, std::strerror(errno));
    std::fclose(fp);
  }
  return train(
      [&](const Tokenizer& skeleton, WordCounts& counts) {
        // Stream: blocks of ~1 MB cut after a newline (no piece crosses a newline, an added
        // token), counted kBatchBlocks at a time on all threads.
        std::vector<std::string> batch;
        int64_t total = 0;
        for (const std::string& f : files) {
          std::error_code ec;
          total += int64_t(std::filesystem::file_size(f, ec));
        }
        Progress progress("tokenizer-train: counting", total, "",
                          {.quiet = !opt.progress, .bytes = true});
        size_t bytes = 0;
        for (const std::string& f : files) {
          std::FILE* fp = std::fopen(f.c_str(), "rb");
          if (!fp) fail("{}: cannot open training text: {}", f, std::strerror(errno));
          std::string carry;
          std::vector<char> buf(kBlockBytes);
          size_t n;
          while ((n = std::fread(buf.data(), 1, buf.size(), fp)) > 0) {
            std::string block = std::move(carry);
            block.append(buf.data(), n);
            const size_t cut = block.rfind('\n');
            carry = cut == std::string::npos ? std::string() : block.substr(cut + 1);
            if (cut != std::string::npos) block.resize(cut + 1);
            bytes += n;
            batch.push_back(std::move(block));
            if (batch.size() == kBatchBlocks) {
              count_blocks(skeleton, batch, counts);
              batch.clear();
              progress.update(int64_t(bytes));
            }
          }
          const bool err = std::ferror(fp);
          std::fclose(fp);
          if (err) fail("{}: read error", f);
          if (!carry.empty()) batch.push_back(std::move(carry));
        }
        count_blocks(skeleton, batch, counts);
        progress.update(int64_t(bytes));
        progress.finish();
      },
      vocab_size, opt,
      [&] {
        std::string names;
        int64_t bytes = 0;
        for (size_t i = 0; i < files.size(); ++i) {
          std::error_code ec;
          const auto n = std::filesystem::file_size(files[i], ec);
          bytes += ec ? 0 : int64_t(n);
          if (i < 3) names += (i ? ", " : "") + files[i];
        }
        if (files.size() > 3) names += fmt::format(" and {} more", files.size() - 3);
        return fmt::format("{} ({} bytes)", names, bytes);
      });
}

}  // namespace zaya
