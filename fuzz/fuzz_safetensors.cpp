// Fuzz target: a .safetensors file (header JSON, dtypes, shapes, offsets), then every tensor read
// into an F32 buffer of its shape.
#include <vector>

#include "core/tensor.h"
#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::input_file(data, size, "model.safetensors");
  zaya::fuzz::expect_clean([&] {
    const zaya::SafeTensors st = zaya::SafeTensors::open_file(path);
    for (const std::string& name : st.names()) {
      const zaya::SafeTensorInfo& info = st.at(name);
      if (info.shape.size() > 4 || info.numel() > (int64_t(1) << 20)) continue;  // bounded work
      std::vector<float> buf(size_t(info.numel()));
      zaya::Tensor t;  // an F32 view of the stored shape
      t.data = buf.data();
      for (int64_t d : info.shape) t.shape[size_t(t.ndim++)] = d;
      zaya::fuzz::expect_clean([&] { st.read_into(name, t); });
    }
  });
  return 0;
}
