# SPDX-License-Identifier: Apache-2.0
# h3000 ingest - the two entry points. Each installs what is missing, configures, builds.
#   make demo   start ingestd on loopback with the embedded defaults, send a few hundred
#               frames, verify them, print throughput and ack latency, stop
#   make test   unit + functional + interop tests under ASan/UBSan, a short fuzz regression
#               run, the short fault suite, then the whole suite (unit, functional, real
#               gRPC clients, RDMA on Soft-RoCE in a qemu guest)
#   make fuzz   every libFuzzer target for FUZZ_SECONDS each (clang tree build-fuzz/)
#   make fault  the fault suite, FAULT_ITERATIONS kill -9 rounds (root: loop devices)
#   make test-tsan  unit + functional tests that run threads, under ThreadSanitizer
BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
BUILD_TSAN ?= build-tsan
FUZZ_SECONDS ?= 60
FAULT_ITERATIONS ?= 50
FUZZ_CC    ?= clang-14
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps build build-asan build-fuzz build-tsan demo test test-unit test-asan test-tsan \
	fuzz fault bench clean

all: build

deps:
	@deploy/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

build-asan: deps
	@cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DING_SANITIZE=ON $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD_ASAN) -j$(JOBS)

# libFuzzer needs clang; the tree holds only the fuzz targets and the libraries they use.
build-fuzz: deps
	@cmake -S . -B $(BUILD_FUZZ) -DCMAKE_C_COMPILER=$(FUZZ_CC) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DING_FUZZ=ON $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD_FUZZ) -j$(JOBS) --target fuzz_all

build-tsan: deps
	@cmake -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=Debug -DING_SANITIZE_THREAD=ON $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD_TSAN) -j$(JOBS)

demo: build
	@deploy/demo.sh $(BUILD)

# Everything but the guest run goes through the sanitized tree first (ingestd, ingest-send
# and the libraries under ASan/UBSan, driven by the real gRPC clients; a sanitizer report
# aborts the process, and the tests check exit statuses), then the whole suite runs in the
# release tree, so the last ctest summary counts every test. The guest run stays
# release-only: ASan binaries under qemu TCG would take minutes more.
SAN_ENV = ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

test-asan: build-asan
	@cd $(BUILD_ASAN) && $(SAN_ENV) ctest -LE 'rdma|fault' --output-on-failure --timeout 300

test-unit: build
	@cd $(BUILD) && ctest -L unit --output-on-failure

test: build build-asan build-fuzz
	@cd $(BUILD_ASAN) && $(SAN_ENV) ctest -LE 'rdma|fault' --output-on-failure --timeout 300
	@cd $(BUILD_FUZZ) && ctest -L fuzz --output-on-failure
	@cd $(BUILD) && ctest -LE fuzz --output-on-failure --timeout 1200

fuzz: build-fuzz
	@tests/fuzz/fuzz-all.sh $(BUILD_FUZZ) $(FUZZ_SECONDS)

fault: build
	@FAULT_ITERATIONS=$(FAULT_ITERATIONS) tests/fault/run_all.sh $(BUILD)

TSAN_ENV = TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp

test-tsan: build-tsan
	@cd $(BUILD_TSAN) && $(TSAN_ENV) ctest -L tsan --output-on-failure --timeout 600

bench: build
	@echo "bench/fallback.sh $(BUILD)   bench/rdma.sh $(BUILD)   bench/numa.sh $(BUILD)"

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ) $(BUILD_TSAN)
