// The one switch between the GPU vendors: CMake defines ZAYA_GPU_CUDA for the NVIDIA build
// (nvcc), ZAYA_GPU_HIP for the AMD one (hipcc) and ZAYA_GPU_HOST for the build that runs the
// kernels on the host's CPU (vendor/emu.h). Everything in ops/gpu/ includes this, never a
// vendor's header directly.
#pragma once
#if defined(ZAYA_GPU_HIP)
#include "ops/gpu/vendor/hip.h"
#elif defined(ZAYA_GPU_CUDA)
#include "ops/gpu/vendor/cuda.h"
#elif defined(ZAYA_GPU_HOST)
#include "ops/gpu/vendor/emu.h"
#else
#error "ops/gpu/ is compiled only with ZAYA_GPU=CUDA, HIP or EMU"
#endif
