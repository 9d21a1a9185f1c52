// NVIDIA side of the one GPU source tree: the CUDA runtime, cuBLASLt and the warp primitives
// under the names the kernels use (CUDA's own). vendor/hip.h maps the same names onto HIP.
#pragma once
#include <cuda_runtime.h>

#define ZAYA_GPU_VENDOR "CUDA"

// A full-warp butterfly shuffle (every lane takes part).
#define ZAYA_SHFL_XOR(v, mask) __shfl_xor_sync(0xffffffffu, (v), (mask))
#define ZAYA_SHFL(v, lane) __shfl_sync(0xffffffffu, (v), (lane))
