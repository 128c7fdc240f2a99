# SPDX-License-Identifier: Apache-2.0
# h3000 ingest - the two entry points. Each installs what is missing, configures, builds.
#   make demo   start ingestd on loopback with the embedded defaults, send a few hundred
#               frames, verify them, print throughput and ack latency, stop; TIER=1: through
#               the object store tier too (a single-node Ceph on this machine)
#   make demo-fleet  PostgreSQL + three ingestd, ingest-send --servers, kill -9 one node
#               mid-stream, print where every frame ended up and that none was lost;
#               RDMA=1: the same over RDMA READ in the Soft-RoCE qemu guest
#   make test   every test once (tests/suite.sh): unit, functional, interop, review, ops, cli
#               under ASan/UBSan; a short fuzz regression run; in the release tree what the
#               sanitized tree cannot run (the Soft-RoCE qemu guest, packages, the short
#               fault suite, C#, the object store tier, the fleet's failovers), started first
#               and run beside the others; then the ten slowest tests and the total
#   make test-quick  unit + functional tests under ASan/UBSan, the inner loop
#   make bench  a short latency sweep with ingest-bench; says where the report is
#   make fuzz   every libFuzzer target for FUZZ_SECONDS each (clang tree build-fuzz/)
#   make fault  the fault suite, FAULT_ITERATIONS kill -9 rounds (root: loop devices)
#   make test-tsan  unit + functional tests that run threads, under ThreadSanitizer
#   make nuget  H3000.Ingest.<version>.nupkg (the .NET binding) into build/nuget (.NET SDK)
BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
BUILD_TSAN ?= build-tsan
FUZZ_SECONDS ?= 60
FAULT_ITERATIONS ?= 50
FUZZ_CC    ?= clang-14
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps deps-build deps-deb deps-demo build build-asan build-fuzz build-tsan demo demo-fleet test test-unit \
	test-asan test-quick test-tsan test-clock configure-asan fuzz fault bench clean install deb abi-baseline
PREFIX     ?= /usr/local
UNITDIR    ?=

all: build

# Debian packages (deploy/install-deps.sh): the product's build set for build/install,
# + packaging tools for deb, + everything the tests, demos and benchmarks run for the rest
deps-build:
	@deploy/install-deps.sh build
deps-deb:
	@deploy/install-deps.sh deb
deps:
	@deploy/install-deps.sh all
deps-demo:
	@deploy/install-deps.sh $(if $(filter 1,$(TIER)),demo-tier,demo)

# configure quietly, but show cmake's whole output when it fails
CONFIGURE = mkdir -p $(1) && cmake -S . -B $(1) $(2) $(CMAKE_ARGS) >$(1)/configure.log 2>&1 || \
	{ cat $(1)/configure.log; echo "cmake configure of $(1) failed (log: $(1)/configure.log)" >&2; exit 1; }

build: deps-build
	@$(call CONFIGURE,$(BUILD),-DCMAKE_BUILD_TYPE=RelWithDebInfo)
	@cmake --build $(BUILD) -j$(JOBS)

# (configure-asan alone: make test reads the sanitized tree's test list before building it)
configure-asan: deps
	@$(call CONFIGURE,$(BUILD_ASAN),-DCMAKE_BUILD_TYPE=Debug -DING_SANITIZE=ON)

build-asan: configure-asan
	@cmake --build $(BUILD_ASAN) -j$(JOBS)

# programs, libingest.so.1, header, ingest.pc, CMake package, systemd units, config, man
# pages, docs; the build packages only (no test dependencies). It does not create the
# service user or enable anything: README "Install" has the commands.
# UNITDIR: where the systemd units go (default PREFIX/lib/systemd/system; /lib/... for /usr)
# Builds what is installed (target ing_install_set), not the tests.
install: deps-build
	@$(call CONFIGURE,$(BUILD),-DCMAKE_BUILD_TYPE=RelWithDebInfo)
	@cmake --build $(BUILD) -j$(JOBS) --target ing_install_set
	@ING_UNITDIR=$(UNITDIR) cmake --install $(BUILD) --prefix $(PREFIX)

# h3000-ingest and h3000-ingest-dev .debs (CPack) from the release tree, into $(BUILD)/deb-out
# (older .debs there are removed, so ./build/deb-out/h3000-ingest_*_amd64.deb is one file)
deb: deps-deb build
	@rm -f $(CURDIR)/$(BUILD)/deb-out/*.deb
	@cd $(BUILD) && cpack -G DEB -B $(CURDIR)/$(BUILD)/deb-out >/dev/null && ls $(CURDIR)/$(BUILD)/deb-out/*.deb

# H3000.Ingest.<version>.nupkg (the .NET binding, libingest.so.1 under
# runtimes/linux-x64/native/) into $(BUILD)/nuget; needs the .NET SDK (README)
nuget: build
	@bindings/dotnet/pack.sh $(BUILD)

# libFuzzer needs clang; the tree holds only the fuzz targets and the libraries they use.
build-fuzz: deps
	@$(call CONFIGURE,$(BUILD_FUZZ),-DCMAKE_C_COMPILER=$(FUZZ_CC) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DING_FUZZ=ON)
	@cmake --build $(BUILD_FUZZ) -j$(JOBS) --target fuzz_all

build-tsan: deps
	@$(call CONFIGURE,$(BUILD_TSAN),-DCMAKE_BUILD_TYPE=Debug -DING_SANITIZE_THREAD=ON)
	@cmake --build $(BUILD_TSAN) -j$(JOBS)

# TIER=1: the same through the object store tier (a single-node Ceph started for it).
# Installs only what the demo runs: deploy/install-deps.sh demo (demo-tier with TIER=1)
demo: deps-demo build
	@deploy/demo.sh $(BUILD) $(if $(filter 1,$(TIER)),--tier)

# PostgreSQL + three ingestd on this machine, one killed mid-stream (docs/FLEET.md)
demo-fleet: deps build
	@deploy/demo-fleet.sh $(BUILD) $(if $(filter 1,$(RDMA)),--rdma)

# Every test once, where it means most (tests/CMakeLists.txt, label release): the
# sanitized tree runs everything it can (ingestd, ingest-send and the libraries under
# ASan/UBSan, driven by the real gRPC clients; a sanitizer report aborts the process, and
# the tests check exit statuses); the release tree runs what an ASan build cannot (an
# ASan libingest cannot be loaded by uninstrumented programs nor by dotnet; ASan binaries
# under qemu TCG would take far longer) or should not (the fault suite times real processes).
SAN_ENV = ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
SUITE_ENV = BUILD=$(BUILD) BUILD_ASAN=$(BUILD_ASAN) BUILD_FUZZ=$(BUILD_FUZZ) JOBS=$(JOBS) \
	MAKE="$(MAKE)" ING_SUITE_T0=$$(cat $(CURDIR)/$(BUILD)/.test-t0 2>/dev/null || date +%s)

test-asan: build-asan
	@cd $(BUILD_ASAN) && $(SAN_ENV) ctest -LE release -j$(JOBS) --output-on-failure

# unit + functional tests in the ASan/UBSan tree (about 2-3 minutes here)
test-quick: test-clock build-asan
	@$(SUITE_ENV) tests/suite.sh quick

test-unit: deps build
	@cd $(BUILD) && ctest -L unit --output-on-failure

# Deliberately accept libingest's current ABI as the baseline that `make test` checks
# (tests/package/abi_check.sh): only after a reviewed, intended change of include/ingest/.
abi-baseline: build
	@abidw --no-corpus-path --no-show-locs --no-comp-dir-path --headers-dir include/ingest --out-file producer/libingest.abi \
		$(BUILD)/producer/libingest.so.1 && sed -i 's|$(CURDIR)/||g' producer/libingest.abi && \
		echo "producer/libingest.abi updated: commit it"

# the release tree's pass starts as soon as the release tree is built (the guest boot,
# the longest test, first) and runs beside the build and the passes of the ASan and fuzz
# trees (tests/suite.sh); at the end the ten slowest tests and the total since this line
test-clock:
	@mkdir -p $(BUILD) && date +%s >$(CURDIR)/$(BUILD)/.test-t0

test: test-clock deps build
	@$(SUITE_ENV) tests/suite.sh full

fuzz: build-fuzz
	@tests/fuzz/fuzz-all.sh $(BUILD_FUZZ) $(FUZZ_SECONDS)

fault: deps build
	@FAULT_ITERATIONS=$(FAULT_ITERATIONS) tests/fault/run_all.sh $(BUILD)

TSAN_ENV = TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp

test-tsan: build-tsan
	@cd $(BUILD_TSAN) && $(TSAN_ENV) ctest -L tsan --output-on-failure --timeout 900

# A short latency sweep (gRPC fallback, 4 MiB, 10..90 % of the measured capacity, about
# a minute): report.md with plots under $(BUILD)/bench-results/; BENCH_ARGS go to ingest-bench.
bench: deps build
	@bench/latency.sh $(BUILD) $(BENCH_ARGS)
	@echo "more: bench/fallback.sh $(BUILD)   bench/rdma.sh $(BUILD)   bench/numa.sh $(BUILD)"

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ) $(BUILD_TSAN)
