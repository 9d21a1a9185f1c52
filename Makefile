# Thin wrapper over CMake presets. `make test` builds (release) and runs the whole suite.
JOBS ?= $(shell nproc)

.PHONY: build test debug demo format clean fuzz

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
FUZZ_TARGETS ?= safetensors config tokenizer shards toml openai
fuzz:
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	mkdir -p build/fuzz/findings
	set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p build/fuzz/corpus/$$t; \
	  echo "== fuzz_$$t ($(FUZZ_SECONDS) s)"; \
	  build/fuzz/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=1048576 -rss_limit_mb=4096 \
	    -timeout=10 -print_final_stats=1 -artifact_prefix=build/fuzz/findings/$$t- \
	    build/fuzz/corpus/$$t fuzz/corpus/$$t; \
	done

demo: build
	bash scripts/demo.sh

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf build
