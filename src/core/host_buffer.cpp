#include "core/host_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/arena.h"
#include "core/assert.h"
#include "core/device.h"

namespace zaya {

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kHugePage = size_t(2) << 20;

size_t round_up(size_t bytes, size_t to) {
  return (bytes + to - 1) / to * to;
}

}  // namespace

HostBuffer::HostBuffer(size_t bytes, bool pin, std::string_view what)
    : size_(round_up(bytes, bytes >= kHugePage ? kHugePage : kPage)) {
  if (size_ == 0) return;
  note_allocation(size_, Device::Cpu, what);
  void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    fail("out of memory: cannot map {} bytes of {}: {}", size_, what, std::strerror(errno));
  if (size_ >= kHugePage) ::madvise(p, size_, MADV_HUGEPAGE);  // a hint: fine if THP is off
  data_ = static_cast<char*>(p);
  for (size_t off = 0; off < size_; off += kPage) data_[off] = 0;  // fault in now
  if (pin) pinned_ = gpu::pin_host(data_, size_);
}

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      pinned_(std::exchange(o.pinned_, false)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  std::swap(data_, o.data_);
  std::swap(size_, o.size_);
  std::swap(pinned_, o.pinned_);
  return *this;
}

HostBuffer::~HostBuffer() {
  if (pinned_) gpu::unpin_host(data_);
  if (data_) ::munmap(data_, size_);
}

}  // namespace zaya
