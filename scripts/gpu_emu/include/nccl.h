// GPU emulator: stands in for NCCL's nccl.h when src/dist/nccl.cpp is compiled against the
// emulated runtime (the real header needs cuda_runtime.h): zaya's own declarations of the NCCL
// interface (src/dist/nccl_abi.h, NCCL 2.14's ABI, the HIP build's too). The functions live in
// libnccl_emu.so (nccl_emu.cpp), which the group loads through ZAYA_NCCL_LIB as it would load
// libnccl.so.2.
#pragma once
#include "dist/nccl_abi.h"
