// dist::SingleGroup: the size-1 group (the default outside a launcher). Every collective is a
// copy or a no-op, but argument checks are the same as the MPI group's, so a program that runs on
// one process with `single` makes the same calls it would make on N ranks. Buffers may live on
// any device (the GPU trainer's ZeRO bucket): the copies go through core's device_copy.
#include <cstring>

#include "core/arena.h"
#include "core/heartbeat.h"
#include "dist/group_impl.h"

namespace zaya::dist {
namespace {

class SingleGroup final : public Group {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Backend backend() const override { return Backend::Single; }

  void all_reduce(const Tensor& buf, ReduceOp) override {
    check_buffer("all_reduce", buf);
    const heartbeat::Scope beat(heartbeat::Section::Collective, "all_reduce");
  }
  void reduce_scatter(const Tensor& send, const Tensor& recv) override {
    check_chunks("reduce_scatter", send, recv, 1);
    const heartbeat::Scope beat(heartbeat::Section::Collective, "reduce_scatter");
    copy(recv, send);
  }
  void all_gather(const Tensor& send, const Tensor& recv) override {
    check_chunks("all_gather", recv, send, 1);
    const heartbeat::Scope beat(heartbeat::Section::Collective, "all_gather");
    copy(recv, send);
  }
  void broadcast(const Tensor& buf, int root) override {
    check_buffer("broadcast", buf);
    check_root("broadcast", root, 1);
    const heartbeat::Scope beat(heartbeat::Section::Collective, "broadcast");
  }
  void barrier() override {
    const heartbeat::Scope beat(heartbeat::Section::Collective, "barrier");
  }

 private:
  // recv and send of one call are the same memory or disjoint (the group contract's aliasing is
  // chunk rank() = the whole buffer at size 1).
  static void copy(const Tensor& dst, const Tensor& src) {
    if (dst.data == src.data || src.nbytes() == 0) return;
    if (dst.device == Device::Cpu && src.device == Device::Cpu)
      std::memmove(dst.data, src.data, src.nbytes());
    else
      device_copy(dst, src);
  }
};

}  // namespace

std::unique_ptr<Group> make_single_group() {
  return std::make_unique<SingleGroup>();
}

}  // namespace zaya::dist
