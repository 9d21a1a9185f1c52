// zaya's declarations of the NCCL interface (dist/nccl_abi.h: the HIP build's, where Debian has
// no RCCL header, and the GPU emulator's) against the CUDA build's nccl.h: the same enumerator
// values, unique id size, NCCL_VERSION codes, config layout (ours is NCCL 2.14's prefix of the
// real struct, with the same magic and "undefined" defaults) and entry-point types. CUDA build
// only (it needs nccl.h); needs no GPU. Other builds skip ("no NCCL", tests/test_skips.h).
#include <gtest/gtest.h>

#include "test_skips.h"

#if defined(ZAYA_GPU_CUDA)
#include <nccl.h>
// (the facts header reads the declarations above)
#include "dist/nccl_abi_facts.h"
#endif

namespace zaya::test {
namespace {

TEST(NcclAbi, OurDeclarationsMatchNcclH) {
#if !defined(ZAYA_GPU_CUDA)
  ZAYA_SKIP(NoNccl) << "this build has no nccl.h (the CUDA build compares dist/nccl_abi.h with its "
                       "nccl.h)";
#else
  const NcclFacts real = facts_of_the_nccl_in_scope();
  const NcclFacts ours = nccl_abi_facts();
  EXPECT_EQ(ours.unique_id_bytes, real.unique_id_bytes);
  EXPECT_EQ(ours.results, real.results);
  EXPECT_EQ(ours.reduce_ops, real.reduce_ops);
  EXPECT_EQ(ours.data_types, real.data_types);
  EXPECT_EQ(ours.config_offsets, real.config_offsets);
  EXPECT_LE(ours.config_bytes, real.config_bytes);
  EXPECT_EQ(ours.config_bytes, ours.config_offsets.back() + sizeof(const char*));
  EXPECT_EQ(ours.config_magic, real.config_magic);
  EXPECT_EQ(ours.config_undefined, real.config_undefined);
  EXPECT_EQ(ours.version_codes, real.version_codes);
  ASSERT_EQ(ours.entry_points.size(), real.entry_points.size());
  for (size_t i = 0; i < ours.entry_points.size(); ++i)
    EXPECT_EQ(ours.entry_points[i], real.entry_points[i]) << "entry point " << i;
  // Ours declares NCCL 2.14's interface; this nccl.h is newer.
  EXPECT_GE(NCCL_VERSION_CODE, NCCL_VERSION(2, 14, 0));
#endif
}

}  // namespace
}  // namespace zaya::test
