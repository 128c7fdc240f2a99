# SPDX-License-Identifier: Apache-2.0
# h3000 ingest - the two entry points. Each installs what is missing, configures, builds.
#   make demo   start ingestd on loopback with the embedded defaults, send a few hundred
#               frames, verify them, print throughput and ack latency, stop
#   make test   unit + functional + interop tests under ASan/UBSan, then the whole suite
#               (unit, functional, real gRPC clients, RDMA on Soft-RoCE in a qemu guest)
#   make bench  a short latency sweep with ingest-bench; says where the report is
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps build build-asan demo test test-unit test-asan bench clean

all: build

deps:
	@deploy/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

build-asan: deps
	@cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DING_SANITIZE=ON $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD_ASAN) -j$(JOBS)

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
	@cd $(BUILD_ASAN) && $(SAN_ENV) ctest -LE rdma --output-on-failure --timeout 300

test-unit: build
	@cd $(BUILD) && ctest -L unit --output-on-failure

test: build build-asan
	@cd $(BUILD_ASAN) && $(SAN_ENV) ctest -LE rdma --output-on-failure --timeout 300
	@cd $(BUILD) && ctest --output-on-failure --timeout 1200

# A short latency sweep (gRPC fallback, 4 MiB, 10..90 % of the measured capacity, about
# a minute): report.md with plots under $(BUILD)/bench-results/; BENCH_ARGS go to ingest-bench.
bench: build
	@bench/latency.sh $(BUILD) $(BENCH_ARGS)
	@echo "more: bench/fallback.sh $(BUILD)   bench/rdma.sh $(BUILD)   bench/numa.sh $(BUILD)"

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
