// The one switch between the two GPU vendors: CMake defines ZAYA_GPU_HIP for the AMD build
// (hipcc) and ZAYA_GPU_CUDA for the NVIDIA one (nvcc). Everything in ops/gpu/ includes this, never
// a vendor's header directly.
#pragma once
#if defined(ZAYA_GPU_HIP)
#include "ops/gpu/vendor/hip.h"
#elif defined(ZAYA_GPU_CUDA)
#include "ops/gpu/vendor/cuda.h"
#else
#error "ops/gpu/ is compiled only with ZAYA_GPU=CUDA or HIP"
#endif
