// TokenStaging: the host side of the training micro-batches' tokens on their way to the model's
// device. Each micro-batch's inputs and targets (B·T each) are written by the data loader into a
// slot; slots are used in turn. On a GPU there are kSlots of them, page-locked, and the copies to
// the device are asynchronous (model_forward_and_head_backward with a loss tensor): the host fills
// slot k + 1, and issues micro-batch k + 1's kernels, while the device still works on micro-batch
// k. Before a slot is written again its Fence (recorded after the work that read it was issued)
// is waited for, so the host never overwrites tokens the device has not copied yet. On the CPU:
// one slot of ordinary memory, nothing to wait for.
#pragma once
#include <array>
#include <cstdint>

#include "core/device.h"
#include "core/host_buffer.h"

namespace zaya {

class TokenStaging {
 public:
  static constexpr int kSlots = 2;
  struct Slot {
    int32_t* inputs = nullptr;   // [B·T]
    int32_t* targets = nullptr;  // [B·T]
  };

  TokenStaging(Device device, int64_t tokens);
  // The next slot, once the device is done with what it last held (waits for its fence).
  Slot next();
  // Marks the work issued so far as the last that reads the slot next() returned.
  void issued();
  // Whether the slots are page-locked (false on the CPU, or where pin_host refused).
  bool pinned() const { return memory_.pinned(); }
  int slots() const { return device_ == Device::Cpu ? 1 : kSlots; }

 private:
  Device device_;
  int64_t tokens_;
  int current_ = -1;
  HostBuffer memory_;
  std::array<gpu::Fence, kSlots> fences_;
};

}  // namespace zaya
