#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run.sh STEP BUILD_DIR SRC_DIR - the C# tests (ctest label "dotnet"), one step each:
#   build    restore + build every C# project once (tests/dotnet/all.slnx) into
#            BUILD_DIR/dotnet, the protocol's code generated from the protos as
#            `cmake --install` ships them; the other steps need it (ctest fixture dotnet_built)
#   interop  tests/interop/dotnet/Interop (interop.seed_dotnet)
#   binding  the H3000.Ingest xunit tests in one process (dotnet.binding), with only
#            libingest.so.1 on the loader path, as the runtime .deb ships it
#   sample   make nuget's package into a local feed, samples/dotnet restored from it,
#            built and run against an ingestd (dotnet.nuget_sample)
# Without the .NET SDK every step prints one NOT RUN line and exits 77 (ctest
# SKIP_RETURN_CODE): never a pass. `make test` prints "dotnet SDK not found: N C# tests
# not run" once. The SDK: https://learn.microsoft.com/dotnet/core/install/linux-debian
# (not installed by deploy/install-deps.sh).
set -euo pipefail
STEP=${1:?usage: run.sh build|interop|binding|sample BUILD_DIR SRC_DIR}
BUILD=$(cd "${2:?BUILD_DIR}" && pwd)
SRC=$(cd "${3:?SRC_DIR}" && pwd)
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
export ING_DOTNET_ARTIFACTS=$BUILD/dotnet ING_BUILD_DIR=$BUILD ING_SRC_DIR=$SRC
if ! command -v dotnet >/dev/null 2>&1; then
	echo "NOT RUN: dotnet SDK not found (the .NET 10 SDK: see README, 'C# producers'); C# test step '$STEP' not run"
	exit 77
fi
OUT=$BUILD/dotnet/bin
# the packages come from the default feed; where this machine has a local package folder
# (xunit, test SDK) it is a second source
SOURCES=()
if [ -d /opt/nuget/packages ]; then
	SOURCES=(--source https://api.nuget.org/v3/index.json --source /opt/nuget/packages)
fi
t0=$(date +%s)
case $STEP in
build)
	# the protos as `make install` and the -dev .deb ship them (share/h3000-ingest/proto):
	# the C# tests use code generated from that copy
	PROTO_PREFIX=$BUILD/dotnet/proto-install
	rm -rf "$PROTO_PREFIX"
	cmake --install "$BUILD" --component dev --prefix "$PROTO_PREFIX" >/dev/null
	PROTOS=$PROTO_PREFIX/share/h3000-ingest/proto
	for p in h3000.proto health.proto; do
		cmp -s "$PROTOS/$p" "$SRC/proto/$p" ||
			{ echo "FAIL: cmake --install did not put proto/$p in share/h3000-ingest/proto"; exit 1; }
	done
	dotnet build "$SRC/tests/dotnet/all.slnx" -c Release -nologo -clp:NoSummary -v:q "${SOURCES[@]}" \
		-p:IngProtoDir="$PROTOS/"
	;;
interop)
	dotnet "$OUT/Interop/release/Interop.dll" --work "$BUILD/test-work/seed-dotnet" \
		--ping-minutes "${ING_DOTNET_PING_MINUTES:-2}"
	;;
binding)
	# only the SONAME on the loader path, as the runtime .deb ships libingest
	LIBDIR=$BUILD/dotnet/runtime-lib
	rm -rf "$LIBDIR"
	mkdir -p "$LIBDIR"
	cp -L "$BUILD/producer/libingest.so.1" "$LIBDIR/libingest.so.1"
	LD_LIBRARY_PATH=$LIBDIR ING_RUNTIME_LIB_DIR=$LIBDIR \
		dotnet test "$OUT/H3000.Ingest.Tests/release/H3000.Ingest.Tests.dll" --logger "console;verbosity=normal"
	;;
sample)
	# make nuget's package in a local folder feed; the sample restores it from there alone
	# (a private package folder: never a stale copy of the same version from the user's
	# cache), builds, and runs with no LD_LIBRARY_PATH: the native library must come from
	# the package
	"$SRC/bindings/dotnet/pack.sh" "$BUILD"
	PKGS=$BUILD/dotnet/sample-packages
	rm -rf "$PKGS" "$BUILD/dotnet/sample"
	# H3000.Ingest from the local feed; its dependency (Microsoft.Extensions.Logging.Abstractions)
	# from the default feed, as a user's restore gets it (samples/dotnet/nuget.config adds
	# the local feed to the user's own)
	SAMPLE_SOURCES=()
	[ ${#SOURCES[@]} -gt 0 ] && SAMPLE_SOURCES=(--source "$BUILD/nuget" "${SOURCES[@]}")
	for proj in Producer Protocol; do
		dotnet build "$SRC/samples/dotnet/$proj/$proj.csproj" -c Release -nologo -v:q -clp:NoSummary \
			"${SAMPLE_SOURCES[@]}" --packages "$PKGS" --artifacts-path "$BUILD/dotnet/sample"
	done
	. "$SRC/tests/lib.sh"
	fail() { echo "FAIL: $*"; tail -n 30 "$W/ingestd.log" 2>/dev/null; exit 1; }
	W=$BUILD/test-work/dotnet-sample
	rm -rf "$W"
	mkdir -p "$W"
	PID=
	trap ing_kill_pid EXIT
	ing_start "$BUILD/apps/ingestd" "$W/port" "$W/ingestd.log" --data-dir "$W/data" --pool 1M:16 \
		--workers 1 --rdma off
	PID=$ING_PID
	out=$(env -u LD_LIBRARY_PATH -u H3000_INGEST_LIBRARY dotnet "$BUILD/dotnet/sample/bin/Producer/release_linux-x64/Producer.dll" \
		--server "$ING_SERVER" --count 40 --size 1000000 --wafer sample) || fail "the sample exited $?: $out"
	echo "$out"
	# the build copies the package's native asset next to the program; that copy is loaded
	APP=$BUILD/dotnet/sample/bin/Producer/release_linux-x64
	echo "$out" | grep -q "^libingest 1\..*($APP/libingest.so.1)" ||
		fail "the sample did not load libingest.so.1 from its own folder"
	cmp "$APP/libingest.so.1" "$(ls "$PKGS"/h3000.ingest/*/runtimes/linux-x64/native/libingest.so.1)" ||
		fail "the sample's libingest.so.1 is not the package's"
	echo "$out" | grep -q "^40 of 40 frames stored (0 failed)" || fail "not every frame stored"
	n=$(find "$W/data/frames/sample" -name '*.frame' | wc -l)
	[ "$n" = 40 ] || fail "$n frame files on the node, not 40"
	# the async recycling program: 40 frames through 8 buffers (RentAsync, ReadAcksAsync)
	out=$(env -u LD_LIBRARY_PATH -u H3000_INGEST_LIBRARY dotnet "$BUILD/dotnet/sample/bin/Producer/release_linux-x64/Producer.dll" \
		--server "http://$ING_SERVER" --count 40 --size 1000000 --wafer sample-async --async) ||
		fail "the sample --async exited $?: $out"
	echo "$out" | grep -q "^40 of 40 frames stored (0 failed)" || fail "--async: not every frame stored: $out"
	n=$(find "$W/data/frames/sample-async" -name '*.frame' | wc -l)
	[ "$n" = 40 ] || fail "--async: $n frame files on the node, not 40"
	# Grpc.Net.Client alone, its client generated from the package's content/protos/h3000.proto
	out=$(dotnet "$BUILD/dotnet/sample/bin/Protocol/release/Protocol.dll" --server "http://$ING_SERVER" \
		--count 20 --size 1000000 --wafer sample-grpc) || fail "the protocol sample exited $?: $out"
	echo "$out"
	echo "$out" | grep -q "^20 of 20 frames stored (0 failed)" || fail "protocol sample: not every frame stored: $out"
	n=$(find "$W/data/frames/sample-grpc" -name '*.frame' | wc -l)
	[ "$n" = 20 ] || fail "protocol sample: $n frame files on the node, not 20"
	# the protos came from the package: restore imported its props, which name its content/protos
	G=$(ls "$BUILD"/dotnet/sample/obj/Protocol/Protocol.csproj.nuget.g.props)
	grep -q "<NuGetPackageRoot .*>$PKGS/*</NuGetPackageRoot>" "$G" &&
		grep -q 'Import Project="$(NuGetPackageRoot)/h3000.ingest/[^/]*/build[A-Za-z]*/H3000.Ingest.props"' "$G" ||
		fail "the protocol sample did not import the package's H3000.Ingest.props ($G)"
	for f in H3000.Ingest.dll libingest.so.1; do
		[ ! -e "$BUILD/dotnet/sample/bin/Protocol/release/$f" ] ||
			fail "the protocol sample (the package's build assets only) got $f"
	done
	ing_term_pid
	echo "ok: the sample restored H3000.Ingest from the local feed, loaded its native library, stored 40 frames;" \
		"a Grpc.Net.Client generated from the package's protos stored 20"
	;;
*)
	echo "run.sh: unknown step '$STEP'" >&2
	exit 2
	;;
esac
echo "run.sh $STEP: $(( $(date +%s) - t0 )) s"
