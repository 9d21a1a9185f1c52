// random_model: writes a model directory of random weights for a config (for the real-size
// benchmarks of docs/quantization.md: ZAYA1-8B's shapes are configs/models/zaya1-8b.json, 17.7 GB
// of bf16 — too big to commit, quick to make).
// usage: random_model CONFIG OUT_DIR [--seed N] [--f32] [--tokenizer FILE]
// Built as build/<dir>/benchmarks/random_model.
//
// The weights are exactly InferModel::random(config, seed, BF16 or F32): matrices, experts, the
// embedding and the conv weights uniform with std 0.02 from the counter RNG (stream = the
// tensor's place in the parameter list), vectors initialised as docs/model.md §9 says and stored
// F32. They are streamed to disk one shard at a time (never the whole model in memory), in the
// config's own layout (a native config: transformers' names with stacked experts), with
// model.safetensors.index.json, config.json and, given --tokenizer, a copy of that tokenizer.json.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/assert.h"
#include "core/timer.h"
#include "io/file.h"
#include "io/hf_native_layout.h"
#include "io/safetensors.h"
#include "io/zaya_config.h"
#include "model/param_layout.h"
#include "ops/ops.h"

using namespace zaya;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kShardBytes = uint64_t(5) << 30;

bool keeps_dtype(ParamKind k) {  // as InferModel: these are stored in the matrix dtype
  return k == ParamKind::Matrix || k == ParamKind::Expert || k == ParamKind::Embedding ||
         k == ParamKind::Conv;
}

// One tensor of the file: a parameter, or the stack of a layer's experts (native layout).
struct FileTensor {
  std::string name;
  std::vector<size_t> specs;  // indices into the layout, in order (one, or E experts)
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  size_t bytes = 0;
};

Tensor shaped(void* data, DType t, const std::vector<int64_t>& shape) {
  Tensor v(data, t, {});
  v.ndim = int(shape.size());
  for (int i = 0; i < v.ndim; ++i) v.shape[size_t(i)] = shape[size_t(i)];
  return v;
}

// Fills parameter `s` (the `stream`-th of the layout) as InferModel::random does.
void fill_param(const Tensor& v, const ParamSpec& s, const ZayaConfig& c, uint64_t seed,
                uint64_t stream) {
  if (s.init == ParamInit::Normal) {
    ops::fill_uniform(v, seed, stream, 0.02 * std::sqrt(3.0));
    return;
  }
  ops::fill(v, s.init == ParamInit::One ? 1.0 : 0.0);
  if (s.init == ParamInit::BalancingBias && c.zaya_use_mod)
    ops::fill(v.view({s.numel()}).rows(s.numel() - 1, s.numel()), -1.0);
}

int run(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: random_model CONFIG OUT_DIR [--seed N] [--f32] [--tokenizer F]\n");
    return 2;
  }
  const std::string config_path = argv[1], out = argv[2];
  uint64_t seed = 1;
  DType matrix_dtype = DType::BF16;
  std::string tokenizer;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) {
      seed = std::stoull(argv[++i]);
    } else if (a == "--f32") {
      matrix_dtype = DType::F32;
    } else if (a == "--tokenizer" && i + 1 < argc) {
      tokenizer = argv[++i];
    } else {
      fail("random_model: unknown argument '{}'", a);
    }
  }
  const ZayaConfig c = load_config(config_path);
  const ParamLayout layout = make_param_layout(c);
  const bool native = c.semantics == Semantics::Native;

  // The file's tensors in parameter order; native experts gather into their stacked tensor.
  std::vector<FileTensor> files;
  std::map<std::string, size_t> where;
  for (size_t k = 0; k < layout.specs.size(); ++k) {
    const ParamSpec& s = layout.specs[k];
    const NativeRef ref = native ? native_ref(s.name, c.num_layers()) : NativeRef{s.name, -1};
    const DType t = keeps_dtype(s.kind) ? matrix_dtype : DType::F32;
    auto [it, fresh] = where.emplace(ref.name, files.size());
    if (fresh) files.push_back({ref.name, {}, t, s.shape, 0});
    FileTensor& f = files[it->second];
    f.specs.push_back(k);
    f.bytes += dtype_bytes(t, s.numel());
    if (ref.expert >= 0) {
      f.shape = s.shape;
      f.shape.insert(f.shape.begin(), int64_t(f.specs.size()));
    }
  }

  // Shards of at most kShardBytes (a tensor larger than that gets one of its own).
  std::vector<std::vector<size_t>> shards(1);
  uint64_t in_shard = 0, total = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    if (in_shard > 0 && in_shard + files[f].bytes > kShardBytes)
      shards.emplace_back(), in_shard = 0;
    shards.back().push_back(f);
    in_shard += files[f].bytes;
    total += files[f].bytes;
  }
  fs::create_directories(out);
  std::printf("random_model: %zu tensors, %.2f GB in %zu shard(s) -> %s\n", files.size(),
              double(total) / 1e9, shards.size(), out.c_str());
  Timer timer;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::string file = shards.size() == 1 ? std::string("model.safetensors")
                                                : fmt::format("model-{:05d}-of-{:05d}.safetensors",
                                                              k + 1, shards.size());
    std::vector<std::unique_ptr<Buffer>> bufs;
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (size_t f : shards[k]) {
      const FileTensor& ft = files[f];
      bufs.push_back(std::make_unique<Buffer>(ft.bytes));
      char* p = static_cast<char*>(bufs.back()->data());
      for (size_t spec : ft.specs) {
        const ParamSpec& s = layout.specs[spec];
        const Tensor v = shaped(p, ft.dtype, s.shape);
        fill_param(v, s, c, seed, uint64_t(spec));
        p += v.nbytes();
      }
      tensors.emplace_back(ft.name, shaped(bufs.back()->data(), ft.dtype, ft.shape));
      weight_map[ft.name] = file;
    }
    save_safetensors((fs::path(out) / file).string(), tensors, {{"format", "pt"}});
    std::printf("  %s written (%.1f s)\n", file.c_str(), timer.seconds());
    std::fflush(stdout);
  }
  if (shards.size() > 1) {
    nlohmann::ordered_json j = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file((fs::path(out) / "model.safetensors.index.json").string(), j.dump(2) + "\n");
  }
  save_config(c, (fs::path(out) / "config.json").string());
  if (!tokenizer.empty())
    fs::copy_file(tokenizer, fs::path(out) / "tokenizer.json",
                  fs::copy_options::overwrite_existing);
  std::printf("random_model: done in %.1f s (%.0f MB/s)\n", timer.seconds(),
              double(total) / 1e6 / timer.seconds());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "random_model: %s\n", e.what());
    return 1;
  }
}
