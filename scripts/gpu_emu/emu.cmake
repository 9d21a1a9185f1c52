# The GPU emulator as the GPU vendor of a build (ZAYA_GPU=EMU, the `emu` preset; README.md here).
# Included by the root CMakeLists.txt, in its scope, with ZAYA_GPU_SOURCES holding the GPU
# backend's sources (custom commands' outputs are sources only of targets in the directory that
# declares them). It
# - rewrites each kernel file src/ops/gpu/X.cu into BUILD/gpu_emu/src/X.cu.cpp and each header
#   X.cuh into BUILD/gpu_emu/include/ops/gpu/X.cuh (transform.py: launches become calls of the
#   emulator's scheduler), the generated include directory coming first on zaya_gpu's path;
# - compiles the emulator's runtime (emu.cpp) in place of src/ops/gpu/runtime.cpp;
# - after zaya_gpu exists (zaya_emu_targets): the kernels' compile flags, libnccl_emu.so (the NCCL
#   stand-in the NCCL group loads through ZAYA_NCCL_LIB) and the emulator's self-test.
# ops/gpu/vendor.h picks ops/gpu/vendor/emu.h on ZAYA_GPU_HOST (the root CMakeLists.txt).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(ZAYA_EMU_DIR ${CMAKE_CURRENT_LIST_DIR})
set(ZAYA_EMU_GEN ${CMAKE_BINARY_DIR}/gpu_emu)

# Writes OUT, transform.py's C++ version of IN (a path under the source directory: the #line
# directives and the emulator's error messages name it).
function(zaya_emu_transform in out)
  file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${in})
  add_custom_command(
    OUTPUT ${out}
    COMMAND Python3::Interpreter ${ZAYA_EMU_DIR}/transform.py ${rel} ${out}
    DEPENDS ${in} ${ZAYA_EMU_DIR}/transform.py
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
    COMMENT "gpu_emu: ${rel}"
    VERBATIM)
endfunction()

set(emu_sources ${ZAYA_EMU_DIR}/emu.cpp)
foreach(f ${ZAYA_GPU_SOURCES})
  get_filename_component(name ${f} NAME)
  if(name MATCHES "[.]cu$")
    zaya_emu_transform(${f} ${ZAYA_EMU_GEN}/src/${name}.cpp)
    list(APPEND emu_sources ${ZAYA_EMU_GEN}/src/${name}.cpp)
  elseif(NOT name STREQUAL "runtime.cpp")
    list(APPEND emu_sources ${f})
  endif()
endforeach()
# Headers with launches in them (and common.cuh's warp width): transformed copies, listed as
# sources so that they exist before the first compile that includes them.
file(GLOB emu_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/ops/gpu/*.cuh)
foreach(f ${emu_headers})
  get_filename_component(name ${f} NAME)
  zaya_emu_transform(${f} ${ZAYA_EMU_GEN}/include/ops/gpu/${name})
  list(APPEND emu_sources ${ZAYA_EMU_GEN}/include/ops/gpu/${name})
endforeach()
set(ZAYA_GPU_SOURCES ${emu_sources})

# Every executable exports its symbols: libnccl_emu.so, loaded at run time, calls the emulator's
# device-memory guard (emu::device_open/close) in the executable.
set(CMAKE_ENABLE_EXPORTS ON)

function(zaya_emu_targets)
  # The kernels as the old hand-made build compiled them: -O2 with debug information, no FMA
  # contraction unless ZAYA_EMU_FMA (reproducible bits; nvcc contracts by default), CUDA's
  # pragmas ignored.
  if(ZAYA_EMU_FMA)
    set(contract fast)
  else()
    set(contract off)
  endif()
  target_include_directories(zaya_gpu BEFORE PRIVATE ${ZAYA_EMU_GEN}/include)
  target_compile_options(
    zaya_gpu PRIVATE -O2 -g -ffp-contract=${contract} -Wno-unused-variable -Wno-unused-function
                     -Wno-unknown-pragmas)

  # The NCCL stand-in: each NCCL call a non-blocking MPI collective on emulated device memory.
  if(ZAYA_MPI)
    add_library(nccl_emu SHARED ${ZAYA_EMU_DIR}/nccl_emu.cpp)
    target_include_directories(nccl_emu PRIVATE ${CMAKE_SOURCE_DIR}/src)
    target_compile_definitions(nccl_emu PRIVATE ZAYA_GPU_HOST=1)
    target_link_libraries(nccl_emu PRIVATE MPI::MPI_CXX)
  endif()

  # The emulator's own checks: a block sum, and three bugs it must report.
  zaya_emu_transform(${ZAYA_EMU_DIR}/selftest.cu ${ZAYA_EMU_GEN}/src/selftest.cu.cpp)
  add_executable(gpu_emu_selftest ${ZAYA_EMU_GEN}/src/selftest.cu.cpp)
  target_include_directories(gpu_emu_selftest BEFORE PRIVATE ${ZAYA_EMU_GEN}/include)
  target_compile_options(gpu_emu_selftest PRIVATE -Wno-unknown-pragmas)
  target_link_libraries(gpu_emu_selftest PRIVATE zaya_lib)
  if(ZAYA_BUILD_TESTS)
    enable_testing()
    add_test(NAME gpu_emu_selftest COMMAND gpu_emu_selftest)
    set_tests_properties(gpu_emu_selftest PROPERTIES LABELS gpu)
  endif()
endfunction()
