# Thin wrapper over CMake presets. `make test` builds (release) and runs the whole suite; `make ci`
# is what CI runs (.ci/run): the `hip` and `cuda` GPU builds, the GPU tests on the emulator, then
# the CPU suite (docs/gpu.md).
JOBS ?= $(shell nproc)

.PHONY: build test debug demo format clean fuzz cuda cuda-smoke hip emu-test gpu-bundle ci bench-step

build:
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

test: build
	ctest --preset release -j $(JOBS)

debug:
	cmake --preset debug >/dev/null
	cmake --build --preset debug -j $(JOBS)
	ctest --preset debug -j $(JOBS)

# libFuzzer (clang, ASan + UBSan): each target for FUZZ_SECONDS, seeded from fuzz/corpus/NAME;
# new inputs go to build/fuzz/corpus/NAME, findings (crash-*, leak-*, timeout-*) to
# build/fuzz/findings/ (copy them into fuzz/corpus/NAME once fixed, as regression inputs).
FUZZ_SECONDS ?= 120
FUZZ_TARGETS ?= safetensors config tokenizer shards toml openai run_data jinja tool_calls json_schema \
  gguf tokenizer_gguf cluster supervise_files
# The clang whose OpenMP is installed: ZAYA_HIP=1 setup swaps clang 14's libomp-dev for
# libomp-15-dev (hipcc's), and clang 14 then finds no OpenMP.
FUZZ_CXX ?= $(if $(wildcard /usr/lib/llvm-15/lib/libomp.so),clang++-15,clang++)
fuzz:
	cmake --preset fuzz -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) >/dev/null
	cmake --build --preset fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	mkdir -p build/fuzz/findings
	set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p build/fuzz/corpus/$$t; \
	  echo "== fuzz_$$t ($(FUZZ_SECONDS) s)"; \
	  build/fuzz/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=1048576 -rss_limit_mb=4096 \
	    -timeout=10 -print_final_stats=1 -artifact_prefix=build/fuzz/findings/$$t- \
	    build/fuzz/corpus/$$t fuzz/corpus/$$t; \
	done

# The CUDA build (nvcc 13 at /usr/local/cuda; sm_90a + sm_80): everything, the GPU tests and
# bench_gpu included. cuda-smoke builds and runs what of it needs no GPU: the binary, the `gpu`
# tests (they skip without a device; the target gpu_checks) and bench_gpu (it says why it skips),
# not the CPU tests, which the release build compiles and runs.
cuda:
	cmake --preset cuda >/dev/null
	cmake --build --preset cuda -j $(JOBS)

cuda-smoke:
	cmake --preset cuda >/dev/null
	cmake --build --preset cuda -j $(JOBS) --target zaya bench_gpu gpu_checks
	ctest --preset cuda -L gpu -j $(JOBS)
	build/cuda/benchmarks/bench_gpu

# The AMD compile check (`ZAYA_HIP=1 bash scripts/setup.sh` first): the GPU sources under hipcc
# for gfx90a and gfx940, and the NCCL group against RCCL's interface (src/dist/nccl_abi.h: Debian
# has no RCCL header). Not the rest: the host sources are g++'s in the other builds, Debian has no
# hipBLASLt/RCCL to link against, and hipcc 5.2 compiles plain .cpp files as HIP for its default
# gfx803 too, where clang 15 crashes on some of them (src/data/loader.cpp, prepare.cpp,
# bpe_train.cpp).
HIP_TARGETS ?= zaya_gpu CMakeFiles/zaya_lib.dir/src/dist/nccl.cpp.o
hip:
	cmake --preset hip >/dev/null
	cmake --build --preset hip -j $(JOBS) --target $(HIP_TARGETS)

# The GPU tests on the GPU emulator (the `emu` preset: the kernels of src/ops/gpu/ compiled for the
# host and run on the CPU, scripts/gpu_emu/README.md): every `gpu` test, the two NCCL mpirun jobs
# and the emulator's self-test; the summary in build/emu/gpu_emu/summary.txt.
emu-test:
	ZAYA_EMU_JOBS=$(JOBS) bash scripts/gpu_emu/run.sh

# The relocatable CUDA bundle for a GPU host: build/gpu-bundle/zaya-gpu{,.tar.gz}.
gpu-bundle:
	bash scripts/bundle_gpu.sh

# CI (.ci/run, the README's test command): both GPU builds (their tests skip without a device),
# the GPU tests on the emulator, then the CPU suite last, so that the run ends on the summary of
# the CPU tests.
# Strict: a test that skips for a reason tests/test_skips.h does not allow fails.
ci: export ZAYA_STRICT_SKIPS = 1
ci:
	$(MAKE) hip
	$(MAKE) cuda-smoke
	$(MAKE) emu-test
	$(MAKE) test

# zaya bench step against the PyTorch eager baseline on configs/models/step-bench.json, interleaved
# (scripts/bench_step_vs_torch.sh; needs python3-torch). A benchmark, not a test.
bench-step: build
	bash scripts/bench_step_vs_torch.sh 3

# The demo runs the zaya binary only: it builds nothing else.
demo:
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS) --target zaya
	bash scripts/demo.sh

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf build
