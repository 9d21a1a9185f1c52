// `zaya data prepare` (prepare.h): input files → documents → token ids (EOS-separated) →
// train/val shards by a seeded hash of each document (or a token range of a large one), and the
// dataset manifest.
#include "data/prepare.h"

#include <glob.h>
#include <omp.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>

#include "core/assert.h"
#include "core/progress.h"
#include "core/timer.h"
#include "data/shards.h"
#include "io/file.h"
#include "io/json_parse.h"

namespace zaya {

namespace {

namespace fs = std::filesystem;

constexpr size_t kJsonlPieceBytes = size_t(1) << 20;      // whole lines per JSONL piece
constexpr size_t kRoundBytesPerThread = size_t(8) << 20;  // input encoded per parallel round
constexpr size_t kRoundPiecesPerThread = 64;              // … or this many pieces (small files)
constexpr uint64_t kSplitHashSeed = 0x7a617961;           // "zaya": the train/val hash

bool is_jsonl(const std::string& path) {
  return path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
}

// A unit of parallel work: one text file, or whole lines of a JSONL file.
struct Piece {
  size_t file = 0;
  int64_t first_line = 0;  // JSONL: 1-based number of the first line
  bool jsonl = false;
  std::string bytes;
};

// The encoded documents of one piece, in order. A cut document is two entries here (its train
// part, then its val part).
struct Encoded {
  std::vector<uint32_t> tokens;  // all documents back to back
  std::vector<size_t> doc_end;   // end offset of each document in tokens
  std::vector<uint8_t> doc_val;  // 1: the document goes to "val"
  int64_t documents = 0, empty = 0, cut = 0;
  std::string error;  // non-empty: the first problem, already naming file[:line]
};

// Reads the inputs in order and cuts them into pieces.
class PieceReader {
 public:
  explicit PieceReader(const std::vector<std::string>& files) : files_(files) {}
  ~PieceReader() {
    if (f_) std::fclose(f_);
  }

  std::optional<Piece> next() {
    while (file_ < files_.size()) {
      const std::string& path = files_[file_];
      if (!is_jsonl(path)) {
        Piece p{file_, 0, false, read_text_file(path, "input file")};
        ++file_;
        return p;
      }
      if (!f_) {
        f_ = std::fopen(path.c_str(), "rb");
        if (!f_) fail("{}: cannot open input file: {}", path, std::strerror(errno));
        carry_.clear();
        line_ = 1;
      }
      std::string buf = std::move(carry_);
      carry_.clear();
      const size_t old = buf.size();
      buf.resize(old + kJsonlPieceBytes);
      const size_t n = std::fread(buf.data() + old, 1, kJsonlPieceBytes, f_);
      buf.resize(old + n);
      if (n == 0) {
        if (std::ferror(f_)) fail("{}: read error", path);
        std::fclose(f_);
        f_ = nullptr;
        ++file_;
        if (buf.empty()) continue;
        return make_jsonl_piece(file_ - 1, std::move(buf));  // last line without a newline
      }
      const size_t cut = buf.rfind('\n');
      if (cut == std::string::npos) {  // no whole line yet: keep reading
        carry_ = std::move(buf);
        continue;
      }
      carry_.assign(buf, cut + 1);
      buf.resize(cut + 1);
      return make_jsonl_piece(file_, std::move(buf));
    }
    return std::nullopt;
  }

 private:
  Piece make_jsonl_piece(size_t file, std::string bytes) {
    Piece p{file, line_, true, std::move(bytes)};
    line_ += std::count(p.bytes.begin(), p.bytes.end(), '\n');
    return p;
  }

  const std::vector<std::string>& files_;
  size_t file_ = 0;
  std::FILE* f_ = nullptr;
  std::string carry_;
  int64_t line_ = 1;
};

// Tokens of an n-token document (n ≥ 2) that a cut sends to "val": its val_fraction share,
// rounded, at least one and never all.
size_t val_tail(size_t n, double val_fraction) {
  const auto v = size_t(std::llround(val_fraction * double(n)));
  return std::clamp<size_t>(v, 1, n - 1);
}

// The size over which a document is cut (prepare.h): over 1/kCutShare of the validation target,
// and with a validation share of at least kCutMinValBytes. 0: no cutting (no validation split).
int64_t cut_threshold(double val_fraction, int64_t input_bytes) {
  if (val_fraction <= 0) return 0;
  const double bytes =
      std::max(val_fraction * double(input_bytes) / kCutShare, kCutMinValBytes / val_fraction);
  return int64_t(std::ceil(bytes));
}

bool blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

// Parses and encodes one piece. Never throws: the first problem is returned in `error`.
Encoded encode_piece(const Piece& piece, const std::string& path, const PrepareOptions& opt,
                     int64_t cut_bytes, const EncodeFn& encode) {
  Encoded out;
  std::string where = path;
  auto push = [&](const int32_t* ids, size_t n, bool val) {
    if (opt.bos_id >= 0) out.tokens.push_back(uint32_t(opt.bos_id));
    out.tokens.insert(out.tokens.end(), ids, ids + n);
    out.tokens.push_back(uint32_t(opt.eos_id));
    out.doc_end.push_back(out.tokens.size());
    out.doc_val.push_back(val);
  };
  auto add_doc = [&](std::string_view text) {
    if (text.empty()) {
      ++out.empty;
      return;
    }
    std::vector<int32_t> ids;
    try {
      ids = encode(text);
    } catch (const std::exception& e) {
      fail("{}: cannot tokenize: {}", where, e.what());
    }
    if (ids.empty()) {
      ++out.empty;
      return;
    }
    for (int32_t id : ids)
      if (id < 0 || int64_t(id) >= opt.vocab_size)
        fail("{}: the tokenizer produced token id {}, outside the vocabulary of {}", where, id,
             opt.vocab_size);
    ++out.documents;
    if (cut_bytes > 0 && int64_t(text.size()) >= cut_bytes && ids.size() >= 2) {
      const size_t v = val_tail(ids.size(), opt.val_fraction);
      push(ids.data(), ids.size() - v, false);
      push(ids.data() + ids.size() - v, v, true);
      ++out.cut;
      return;
    }
    const uint64_t h = XXH3_64bits_withSeed(text.data(), text.size(), kSplitHashSeed);
    push(ids.data(), ids.size(), double(h >> 11) * 0x1.0p-53 < opt.val_fraction);
  };
  try {
    if (!piece.jsonl) {
      add_doc(piece.bytes);
      return out;
    }
    std::string_view rest = piece.bytes;
    for (int64_t line = piece.first_line; !rest.empty(); ++line) {
      const size_t nl = rest.find('\n');
      const std::string_view text = rest.substr(0, nl);
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
      if (blank(text)) continue;
      where = fmt::format("{}:{}", path, line);
      nlohmann::json j;
      try {
        j = parse_json(text);
      } catch (const JsonError& e) {
        fail("{}: not valid JSON ({})", where, e.what());
      }
      if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
        fail("{}: expected a JSON object with a string \"text\" field", where);
      add_doc(j["text"].get_ref<const std::string&>());
    }
  } catch (const Error& e) {
    out.error = e.what();
  } catch (const std::exception& e) {
    out.error = fmt::format("{}: {}", where, e.what());
  }
  return out;
}

// One output split: rolls shards at shard_tokens and holds back its latest document so that it
// can still be moved to the other split at the end.
struct SplitWriter {
  SplitWriter(std::string name, std::string dir, uint32_t vocab_size, int64_t shard_tokens)
      : name(std::move(name)),
        dir(std::move(dir)),
        vocab_size(vocab_size),
        shard_tokens(shard_tokens) {}
  std::string name, dir;
  uint32_t vocab_size = 0;
  int64_t shard_tokens = 0;
  SplitInfo info;
  std::unique_ptr<ShardWriter> shard;
  std::vector<uint32_t> pending;
  bool has_pending = false;

  void add(const uint32_t* t, size_t n) {
    if (has_pending) write(pending.data(), pending.size());
    pending.assign(t, t + n);
    has_pending = true;
    ++info.documents;
  }
  // Moves the held-back document to `other`.
  void give_pending_to(SplitWriter& other) {
    ZAYA_ASSERT(has_pending, "no document held back in {}", name);
    other.add(pending.data(), pending.size());
    has_pending = false;
    --info.documents;
  }
  // Cuts the held-back document as prepare.h describes, its val part to `other`; false (nothing
  // done) when it has fewer than 2 tokens besides BOS and EOS.
  bool cut_pending_to(SplitWriter& other, double val_fraction, bool bos) {
    ZAYA_ASSERT(has_pending, "no document held back in {}", name);
    const size_t first = bos ? 1 : 0;
    if (pending.size() < first + 3) return false;
    const size_t n = pending.size() - first - 1;
    const size_t v = val_tail(n, val_fraction);
    std::vector<uint32_t> tail(pending.begin(), pending.begin() + ptrdiff_t(first));
    tail.insert(tail.end(), pending.end() - 1 - ptrdiff_t(v), pending.end());  // … EOS
    pending.erase(pending.end() - 1 - ptrdiff_t(v), pending.end() - 1);
    other.add(tail.data(), tail.size());
    return true;
  }
  void write(const uint32_t* t, size_t n) {
    while (n > 0) {
      if (!shard) {
        const std::string file = fmt::format("{}_{:06}.bin", name, info.shards.size());
        shard = std::make_unique<ShardWriter>(dir + "/" + file, vocab_size);
        info.shards.push_back({file, 0, 0});
      }
      const size_t take = std::min<size_t>(n, size_t(shard_tokens) - shard->tokens());
      shard->append(t, take);
      t += take;
      n -= take;
      info.tokens += int64_t(take);
      if (int64_t(shard->tokens()) == shard_tokens) close_shard();
    }
  }
  void close_shard() {
    ShardEntry& e = info.shards.back();
    e.tokens = int64_t(shard->tokens());
    e.checksum = shard->checksum();
    shard->close();
    shard.reset();
  }
  void finish() {
    if (has_pending) write(pending.data(), pending.size());
    has_pending = false;
    if (shard) close_shard();
  }
};

void check_options(const PrepareOptions& opt) {
  if (opt.inputs.empty()) fail("data prepare: no --input given");
  if (opt.out_dir.empty()) fail("data prepare: no --out directory given");
  if (opt.vocab_size <= 0 || opt.vocab_size > INT32_MAX)
    fail("data prepare: vocab size {} is out of range", opt.vocab_size);
  if (opt.eos_id < 0 || opt.eos_id >= opt.vocab_size)
    fail("data prepare: EOS id {} is outside the vocabulary of {}", opt.eos_id, opt.vocab_size);
  if (opt.bos_id >= opt.vocab_size)
    fail("data prepare: BOS id {} is outside the vocabulary of {}", opt.bos_id, opt.vocab_size);
  if (!(opt.val_fraction >= 0 && opt.val_fraction < 1))
    fail("data prepare: --val-fraction {} must be in [0, 1)", opt.val_fraction);
  if (opt.shard_tokens < 1) fail("data prepare: --shard-tokens {} must be ≥ 1", opt.shard_tokens);
}

// Removes {train,val}_NNNNNN.bin files left by an earlier run that the new manifest omits.
void remove_stale_shards(const std::string& dir, const DatasetManifest& m) {
  std::set<std::string> keep;
  for (const auto& [name, s] : m.splits)
    for (const ShardEntry& e : s.shards) keep.insert(e.file);
  static const std::regex shard_name(R"((train|val)_\d{6}\.bin(\.tmp)?)");
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, shard_name) && !keep.count(name)) fs::remove(entry.path());
  }
}

}  // namespace

std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns) {
  std::vector<std::string> files;
  std::set<std::string> seen;
  for (const std::string& pattern : patterns) {
    glob_t g{};
    const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == GLOB_NOMATCH) {
      ::globfree(&g);
      fail("--input {}: no file matches", pattern);
    }
    if (rc != 0) {
      ::globfree(&g);
      fail("--input {}: cannot expand the pattern ({})", pattern,
           rc == GLOB_ABORTED ? "a directory could not be read" : "out of memory");
    }
    size_t matched = 0;
    for (size_t i = 0; i < g.gl_pathc; ++i) {  // glob(3) returns them sorted
      const std::string path = g.gl_pathv[i];
      struct stat st;
      if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
      ++matched;
      if (seen.insert(path).second) files.push_back(path);
    }
    ::globfree(&g);
    if (matched == 0) fail("--input {}: matches only directories, no files", pattern);
  }
  return files;
}

PrepareStats prepare_shards(const PrepareOptions& opt, const EncodeFn& encode) {
  check_options(opt);
  Timer timer;
  PrepareStats stats;
  const std::vector<std::string> files = expand_inputs(opt.inputs);
  stats.files = int64_t(files.size());
  for (const std::string& f : files) {
    struct stat st;
    if (::stat(f.c_str(), &st) != 0)
      fail("{}: cannot read input file: {}", f, std::strerror(errno));
    stats.input_bytes += int64_t(st.st_size);
  }

  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (ec) fail("{}: cannot create the output directory: {}", opt.out_dir, ec.message());
  fs::remove(fs::path(opt.out_dir) / kManifestName, ec);  // incomplete until rewritten

  stats.cut_bytes = cut_threshold(opt.val_fraction, stats.input_bytes);
  const int threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
  SplitWriter train("train", opt.out_dir, uint32_t(opt.vocab_size), opt.shard_tokens);
  SplitWriter val("val", opt.out_dir, uint32_t(opt.vocab_size), opt.shard_tokens);
  Progress progress("data prepare", stats.input_bytes, "B",
                    Progress::Options{.quiet = opt.quiet, .bytes = true});
  PieceReader reader(files);
  int64_t bytes_done = 0;
  for (bool more = true; more;) {
    // Read one round of pieces (sequential I/O), encode them in parallel, write them in order.
    std::vector<Piece> round;
    size_t round_bytes = 0;
    while (round_bytes < kRoundBytesPerThread * size_t(threads) &&
           round.size() < kRoundPiecesPerThread * size_t(threads)) {
      std::optional<Piece> p = reader.next();
      if (!p) {
        more = false;
        break;
      }
      round_bytes += p->bytes.size();
      round.push_back(std::move(*p));
    }
    std::vector<Encoded> encoded(round.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (size_t i = 0; i < round.size(); ++i)
      encoded[i] = encode_piece(round[i], files[round[i].file], opt, stats.cut_bytes, encode);
    for (size_t i = 0; i < round.size(); ++i) {
      const Encoded& e = encoded[i];
      if (!e.error.empty()) throw Error(e.error);
      stats.documents += e.documents;
      stats.empty_documents += e.empty;
      stats.cut_documents += e.cut;
      size_t begin = 0;
      for (size_t d = 0; d < e.doc_end.size(); ++d) {
        (e.doc_val[d] ? val : train).add(e.tokens.data() + begin, e.doc_end[d] - begin);
        begin = e.doc_end[d];
      }
      bytes_done += int64_t(round[i].bytes.size());
    }
    progress.update(bytes_done,
                    fmt::format("{} docs, {} tokens", human_count(double(stats.documents)),
                                human_count(double(train.info.tokens + val.info.tokens))));
  }

  if (stats.documents == 0)
    fail("no documents: {} input file(s) matched but every document is empty", files.size());
  // Neither split is left empty when it can be filled (see prepare.h).
  if (train.info.documents == 0) val.give_pending_to(train);
  if (opt.val_fraction > 0 && val.info.documents == 0) {
    if (train.info.documents >= 2)
      train.give_pending_to(val);
    else if (train.cut_pending_to(val, opt.val_fraction, opt.bos_id >= 0))
      ++stats.cut_documents;
  }
  train.finish();
  val.finish();

  DatasetManifest m;
  m.vocab_size = opt.vocab_size;
  m.eos_id = opt.eos_id;
  m.bos_id = opt.bos_id;
  m.files = stats.files;
  m.val_fraction = opt.val_fraction;
  m.documents = stats.documents;
  m.cut_documents = stats.cut_documents;
  m.cut_bytes = stats.cut_bytes;
  if (!opt.tokenizer_path.empty()) {
    m.tokenizer_path = fs::absolute(opt.tokenizer_path).lexically_normal().string();
    m.tokenizer_xxh3 = hex64(file_checksum(opt.tokenizer_path));
  }
  m.splits["train"] = train.info;
  if (val.info.documents > 0) m.splits["val"] = val.info;
  remove_stale_shards(opt.out_dir, m);
  write_manifest(opt.out_dir, m);

  stats.train_documents = train.info.documents;
  stats.val_documents = val.info.documents;
  stats.train_tokens = train.info.tokens;
  stats.val_tokens = val.info.tokens;
  stats.train_shards = int64_t(train.info.shards.size());
  stats.val_shards = int64_t(val.info.shards.size());
  progress.finish(fmt::format("{} docs, {} tokens", human_count(double(stats.documents)),
                              human_count(double(stats.train_tokens + stats.val_tokens))));
  stats.seconds = timer.seconds();
  return stats;
}

std::string small_val_warning(const PrepareStats& s, double val_fraction) {
  if (val_fraction <= 0) return "";
  const int64_t need = kSmallValWindows * kSmallValSeqLen + 1;
  if (s.val_tokens >= need) return "";
  if (s.val_tokens == 0)
    return fmt::format(
        "no validation split: the corpus ({} tokens) is too small to set any aside; add text",
        s.train_tokens);
  const int64_t windows = (s.val_tokens - 1) / kSmallValSeqLen;
  return fmt::format(
      "the validation split holds only {} tokens: {} window(s) of seq_len {}, {} of seq_len 128 "
      "(fewer than {} windows of {} gives a noisy validation loss, and none when seq_len ≥ {}); "
      "raise --val-fraction (now {}) or add text",
      s.val_tokens, windows, kSmallValSeqLen, (s.val_tokens - 1) / 128, kSmallValWindows,
      kSmallValSeqLen, s.val_tokens, val_fraction);
}

}  // namespace zaya
