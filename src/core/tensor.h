// Tensor: a non-owning, contiguous, row-major view (pointer + dtype + device + up to 4 dims).
// Memory is owned by arenas/buffers (core/arena.h) or by mapped files; views are cheap to copy and
// every view (view, prefix, rows) keeps its tensor's device.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/assert.h"
#include "core/device.h"
#include "core/dtype.h"

namespace zaya {

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::F32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::F64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::I32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::I64;
}
template <>
constexpr DType dtype_of<uint32_t>() {
  return DType::U32;
}
template <>
constexpr DType dtype_of<uint16_t>() {
  return DType::BF16;
}

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::Cpu;
  int ndim = 0;
  std::array<int64_t, 4> shape{};

  Tensor() = default;
  Tensor(void* p, DType t, std::initializer_list<int64_t> dims) : data(p), dtype(t) {
    ZAYA_ASSERT(dims.size() <= 4, "at most 4 dims, got {}", dims.size());
    for (int64_t d : dims) shape[ndim++] = d;
  }
  template <class T>
  Tensor(T* p, std::initializer_list<int64_t> dims) : Tensor((void*)p, dtype_of<T>(), dims) {}

  bool defined() const { return data != nullptr; }
  // The same view, naming `d` as the device of its memory (a view built from an arena's raw
  // pointer: Tensor(arena_ptr, {n}).on(arena.device())).
  Tensor on(Device d) const {
    Tensor t = *this;
    t.device = d;
    return t;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  // A block-quantized tensor's last dim is a whole number of blocks (checked where it is bound).
  size_t nbytes() const { return dtype_bytes(dtype, numel()); }
  // size(-1) is the last dim.
  int64_t size(int i) const {
    if (i < 0) i += ndim;
    ZAYA_ASSERT(i >= 0 && i < ndim, "dim {} of a {}-d tensor", i, ndim);
    return shape[i];
  }
  template <class T>
  T* ptr() const {
    ZAYA_ASSERT(dtype == dtype_of<T>(), "tensor is {}, accessed as {}", dtype_name(dtype),
                dtype_name(dtype_of<T>()));
    return static_cast<T*>(data);
  }
  // Same memory, new shape (element count must match).
  Tensor view(std::initializer_list<int64_t> dims) const {
    Tensor t(data, dtype, dims);
    t.device = device;
    ZAYA_ASSERT(t.numel() == numel(), "view {} -> {} elements", numel(), t.numel());
    return t;
  }
  // The leading elements of this buffer viewed with a (smaller or equal) shape: lets one scratch
  // buffer sized for the largest layer serve every layer.
  Tensor prefix(std::initializer_list<int64_t> dims) const {
    Tensor t(data, dtype, dims);
    t.device = device;
    ZAYA_ASSERT(t.numel() <= numel(), "prefix {} of a {}-element buffer", t.numel(), numel());
    return t;
  }
  // Rows [begin, end) of the first dimension.
  Tensor rows(int64_t begin, int64_t end) const {
    ZAYA_ASSERT(ndim >= 1 && 0 <= begin && begin <= end && end <= shape[0], "rows [{},{}) of {}",
                begin, end, ndim ? shape[0] : 0);
    int64_t row_elems = 1;
    for (int i = 1; i < ndim; ++i) row_elems *= shape[i];
    Tensor t = *this;
    t.shape[0] = end - begin;
    t.data = static_cast<char*>(data) + dtype_bytes(dtype, begin * row_elems);
    return t;
  }
  std::string shape_str() const {
    std::string s = "[";
    for (int i = 0; i < ndim; ++i) s += (i ? "," : "") + std::to_string(shape[i]);
    return s + "]";
  }
};

// Runs BODY with `scalar_t` bound to float or double according to DTYPE.
#define ZAYA_DISPATCH_FLOAT(DTYPE, ...)                                             \
  do {                                                                              \
    if ((DTYPE) == ::zaya::DType::F32) {                                            \
      using scalar_t = float;                                                       \
      __VA_ARGS__;                                                                  \
    } else if ((DTYPE) == ::zaya::DType::F64) {                                     \
      using scalar_t = double;                                                      \
      __VA_ARGS__;                                                                  \
    } else {                                                                        \
      ZAYA_ASSERT(false, "op needs F32 or F64, got {}", ::zaya::dtype_name(DTYPE)); \
    }                                                                               \
  } while (0)

}  // namespace zaya
