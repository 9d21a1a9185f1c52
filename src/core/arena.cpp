// Buffer and Arena (arena.h): 64-byte-aligned, zero-initialised host allocations; an arena hands
// out aligned tensor views of its buffer by a bump pointer.
#include "core/arena.h"

#include <cstdlib>
#include <cstring>

namespace zaya {

void Buffer::Free::operator()(void* p) const {
  std::free(p);
}

Buffer::Buffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  void* p = std::aligned_alloc(64, Arena::aligned(bytes));
  if (!p) fail("out of memory allocating {} bytes", bytes);
  std::memset(p, 0, Arena::aligned(bytes));
  ptr_.reset(p);
}

void Buffer::zero() {
  if (ptr_) std::memset(ptr_.get(), 0, bytes_);
}

Tensor Arena::alloc(DType t, std::initializer_list<int64_t> dims) {
  Tensor view(nullptr, t, dims);
  size_t need = aligned(view.nbytes());
  ZAYA_ASSERT(used_ + need <= buf_.size(), "arena overflow: {} + {} > {}", used_, need,
              buf_.size());
  view.data = static_cast<char*>(buf_.data()) + used_;
  used_ += need;
  return view;
}

}  // namespace zaya
