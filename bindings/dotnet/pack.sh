#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pack.sh BUILD_DIR - H3000.Ingest.<version>.nupkg into BUILD_DIR/nuget (make nuget):
# the managed library, README.md, libingest.so.1 of BUILD_DIR (debug info stripped)
# under runtimes/linux-x64/native/, and the gRPC protocol (proto/h3000.proto, health.proto)
# under content/protos/ with build/ and buildTransitive/H3000.Ingest.props, which names
# that folder $(H3000IngestProtos) for a Protobuf item (docs/CSHARP.md). rdma-core and the other system libraries libingest
# links (verbs, rdma_cm, nghttp2, protobuf-c, OpenSSL) stay dependencies of the host:
# they are not bundled. The version is libingest's (include/ingest/ingest.h).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "${1:?usage: pack.sh BUILD_DIR}" && pwd)
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 ING_DOTNET_ARTIFACTS=$BUILD/dotnet
command -v dotnet >/dev/null 2>&1 || {
	echo "pack.sh: the .NET SDK (dotnet) is not installed: see README.md, 'C# producers'" >&2
	exit 1
}
LIB=$BUILD/producer/libingest.so.1
[ -f "$LIB" ] || { echo "pack.sh: $LIB not built (make build)" >&2; exit 1; }
ver() { sed -n "s/^#define ING_VERSION_$1 \([0-9]*\).*/\1/p" "$SRC/include/ingest/ingest.h"; }
VERSION=$(ver MAJOR).$(ver MINOR).$(ver PATCH)
NATIVE=$BUILD/dotnet/native
rm -rf "$NATIVE" "$BUILD/nuget"
mkdir -p "$NATIVE"
objcopy --strip-debug "$LIB" "$NATIVE/libingest.so.1"
dotnet pack "$HERE/H3000.Ingest/H3000.Ingest.csproj" -c Release -nologo -v:q -clp:NoSummary \
	-p:IngNativeLib="$NATIVE/libingest.so.1" -p:IngVersion="$VERSION" -o "$BUILD/nuget"
PKG=$BUILD/nuget/H3000.Ingest.$VERSION.nupkg
[ -f "$PKG" ] || { echo "pack.sh: dotnet pack made no $PKG" >&2; exit 1; }
# what a consumer gets: the native library where the host probes for it, nothing of rdma-core
# (the listing read whole first: `unzip | grep -q` under pipefail fails whenever grep's early
# exit makes unzip die of SIGPIPE)
LISTING=$(unzip -l "$PKG")
grep -q ' runtimes/linux-x64/native/libingest.so.1$' <<<"$LISTING" ||
	{ echo "pack.sh: $PKG lacks runtimes/linux-x64/native/libingest.so.1" >&2; exit 1; }
for f in content/protos/h3000.proto content/protos/health.proto build/H3000.Ingest.props \
	buildTransitive/H3000.Ingest.props; do
	grep -q " $f\$" <<<"$LISTING" || { echo "pack.sh: $PKG lacks $f" >&2; exit 1; }
done
for p in h3000.proto health.proto; do
	unzip -p "$PKG" "content/protos/$p" | cmp -s - "$SRC/proto/$p" ||
		{ echo "pack.sh: content/protos/$p in $PKG is not proto/$p" >&2; exit 1; }
done
if grep -E 'libibverbs|librdmacm' <<<"$LISTING" >/dev/null; then
	echo "pack.sh: $PKG bundles rdma-core: it must stay a system dependency" >&2
	exit 1
fi
echo "$PKG"
