// Fuzz target: a GGUF file (GgufFile::from_bytes: header, metadata values, tensor infos, extents),
// every key through the typed getters, every tensor's first and last byte (so the sanitizer checks
// each extent), then, for what parses, the ZAYA1 mapping (gguf_model_from: scheme, 40-block
// refusal, config, completeness) and every parameter's view, first and last byte.
#include <memory>
#include <string>

#include "fuzz_util.h"
#include "infer/gguf_model.h"
#include "io/gguf.h"
#include "model/param_layout.h"

namespace {

volatile unsigned char sink;

void touch(const void* p, size_t n) {
  if (n == 0) return;
  const auto* b = static_cast<const unsigned char*>(p);
  sink = b[0] ^ b[n - 1];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zaya::fuzz::expect_clean([&] {
    auto file = std::make_shared<const zaya::GgufFile>(zaya::GgufFile::from_bytes(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz.gguf"));
    for (const auto& [key, value] : file->metadata()) {
      zaya::fuzz::expect_clean([&] { file->get_int(key); });
      zaya::fuzz::expect_clean([&] { file->get_float(key); });
      zaya::fuzz::expect_clean([&] { file->get_str(key); });
    }
    for (const zaya::GgufTensor& t : file->tensors()) touch(t.data, t.nbytes);
    const zaya::GgufModel model = zaya::gguf_model_from(file);
    const zaya::ParamLayout layout = zaya::make_param_layout(model.config);
    for (const zaya::ParamSpec& spec : layout.specs) {
      const zaya::Tensor t = model.tensor(spec);
      touch(t.data, t.nbytes());
    }
  });
  return 0;
}
