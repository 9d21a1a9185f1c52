// HostBuffer: host memory that device copies read or write. Anonymous memory, faulted in at
// construction (no page faults in the copy that first touches it), transparent huge pages hinted
// from 2 MiB up, and, when asked (the other side is a GPU), page-locked with gpu::pin_host so the
// copies run at the link's DMA rate and can be asynchronous. Pinning that fails (no GPU backend,
// device memory that is host memory, the driver refused) leaves ordinary memory: pinned() says
// which. The checkpoint writer's staging and the trainer's token slots are HostBuffers. Each
// allocation is reported to the allocation hook of core/arena.h (set_allocation_hook) under its
// `what`.
#pragma once
#include <cstddef>
#include <string_view>

namespace zaya {

class HostBuffer {
 public:
  HostBuffer() = default;
  // At least `bytes` (rounded up to whole pages), zero-filled. `what` names the memory in the
  // out-of-memory error.
  HostBuffer(size_t bytes, bool pin, std::string_view what);
  HostBuffer(HostBuffer&& o) noexcept;
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }
  bool pinned() const { return pinned_; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  bool pinned_ = false;
};

}  // namespace zaya
