// Owning memory. Buffer: one zero-initialised, 64-byte-aligned allocation. Arena: a Buffer carved
// into tensors by a bump pointer (params, grads, optimizer state and activations are each one
// arena, so zeroing, copying and reducing them is one loop).
#pragma once
#include <cstddef>
#include <initializer_list>
#include <memory>

#include "core/tensor.h"

namespace zaya {

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes);
  void* data() const { return ptr_.get(); }
  size_t size() const { return bytes_; }
  void zero();

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> ptr_;
  size_t bytes_ = 0;
};

class Arena {
 public:
  Arena() = default;
  explicit Arena(size_t bytes) : buf_(bytes) {}
  // Rounds each allocation up to 64 bytes so every tensor starts cache-line aligned.
  static size_t aligned(size_t bytes) { return (bytes + 63) & ~size_t(63); }
  Tensor alloc(DType t, std::initializer_list<int64_t> dims);
  void reset() { used_ = 0; }
  void zero() { buf_.zero(); }
  size_t used() const { return used_; }
  size_t capacity() const { return buf_.size(); }
  void* base() const { return buf_.data(); }

 private:
  Buffer buf_;
  size_t used_ = 0;
};

}  // namespace zaya
