// The backends' side of the seam: every op of ops/ops.h declared once per backend, in namespace
// ops::cpu (ops/cpu/*.cpp) and ops::gpu (ops/gpu/; ops/gpu/no_gpu.cpp in a build without a GPU),
// from the one list in ops/backend_ops.inc. Only ops/ops.cpp calls these: model, train and infer
// code calls ops::x, which checks the devices and dispatches.
#pragma once
#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "ops/ops.h"        // the parameter types (CopySegment, AdamWParams)
#include "ops/precision.h"  // MatmulPrecision

#define ZAYA_BACKEND_OP(ret, name, params) ret name params;
namespace zaya::ops::cpu {
#include "ops/backend_ops.inc"
}  // namespace zaya::ops::cpu
namespace zaya::ops::gpu {
#include "ops/backend_ops.inc"
}  // namespace zaya::ops::gpu
#undef ZAYA_BACKEND_OP
