#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run.sh STEP BUILD_DIR SRC_DIR - the C# tests (ctest label "dotnet"), one step each:
#   build    restore + build every C# project once (tests/dotnet/all.slnx) into
#            BUILD_DIR/dotnet; the other steps need it (ctest fixture dotnet_built)
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
	dotnet build "$SRC/tests/dotnet/all.slnx" -c Release -nologo -clp:NoSummary -v:q "${SOURCES[@]}" \
		-p:IngNativeLib="$BUILD/producer/libingest.so.1"
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
*)
	echo "run.sh: unknown step '$STEP'" >&2
	exit 2
	;;
esac
echo "run.sh $STEP: $(( $(date +%s) - t0 )) s"
