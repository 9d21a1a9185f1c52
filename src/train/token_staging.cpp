#include "train/token_staging.h"

#include "core/assert.h"

namespace zaya {

TokenStaging::TokenStaging(Device device, int64_t tokens)
    : device_(device),
      tokens_(tokens),
      memory_(size_t(2 * slots() * tokens) * sizeof(int32_t), device == Device::Gpu,
              "the token slots") {
  ZAYA_ASSERT(tokens > 0, "TokenStaging: {} tokens per micro-batch", tokens);
}

TokenStaging::Slot TokenStaging::next() {
  current_ = (current_ + 1) % slots();
  fences_[size_t(current_)].wait();
  int32_t* base = reinterpret_cast<int32_t*>(memory_.data()) + 2 * current_ * tokens_;
  return Slot{base, base + tokens_};
}

void TokenStaging::issued() {
  ZAYA_ASSERT(current_ >= 0, "TokenStaging::issued before next()");
  if (device_ == Device::Gpu) fences_[size_t(current_)].record();  // the CPU's copies are done
}

}  // namespace zaya
