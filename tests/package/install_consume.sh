#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install_consume.sh BUILD_DIR SRC_DIR - what an operator and an application developer get
# from `cmake --install` into a temporary prefix:
#  1. the layout: README's programs (each with its man page and bash completion, no
#     other) and ingest-hugepages, libingest.so.1 (SONAME) with its
#     symlinks, the header, ingest.pc, the CMake package, the systemd units pointing into
#     the prefix, the example config, the service user's sysusers.d entry (systemd-sysusers
#     makes the user from it, as the README says), man pages,
#     docs; for a prefix systemd does not search, the install says the exact command;
#     with the default prefix /usr/local (README: make install) the units land in a
#     directory systemd searches, and UNITDIR (ING_UNITDIR) puts them elsewhere;
#  2. libingest's DPDK, SQLite and hwloc stay private: not in the .so's DT_NEEDED, not in
#     `pkg-config --cflags --libs ingest`, and the installed header compiles on its own;
#  3. a downstream C program (tests/package/consumer) built against the prefix twice, with
#     pkg-config and with find_package(ingest), sends frames to the installed ingestd
#     (127.0.0.1, kernel-picked port) and checks every ack DURABLE with the right CRC;
#  4. abi_compat (same prefix, pkg-config): the 1.x ABI promises, see its header comment;
#  5. ingestd stops with exit 0 on SIGTERM; no fault-injection hook is in what is installed;
#  6. the gRPC protocol in share/h3000-ingest/proto (h3000.proto, health.proto: the
#     source's files): a python3-grpcio client generated from that installed copy alone
#     negotiates, pushes frames the installed ingestd stores, and reads Health SERVING.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
BUILD=$(cd "${1:?usage: install_consume.sh BUILD_DIR SRC_DIR}" && pwd)
SRC=$(cd "${2:?usage: install_consume.sh BUILD_DIR SRC_DIR}" && pwd)
T=$(mktemp -d /tmp/ing-install.XXXXXX)
P=$T/prefix
PID=
cleanup() { ing_kill_pid; rm -rf "$T"; }
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	tail -n 30 "$T/ingestd.log" >&2 2>/dev/null || true
	exit 1
}

step "make install builds what it installs (target ing_install_set), no test"
grep -q -- '--target ing_install_set' "$SRC/Makefile" || fail "make install does not build target ing_install_set"
make -C "$BUILD" -n -B ing_install_set >"$T/plan" 2>&1 || { tail "$T/plan"; fail "make -n ing_install_set"; }
for f in apps/ingestd.c apps/ingest-get.c producer/api.c; do
	grep -q "$f" "$T/plan" || fail "ing_install_set does not build $f"
done
if grep -Eo 'tests/[a-z_/]+\.c' "$T/plan" | sort -u | head -5 | grep .; then
	fail "ing_install_set builds the tests' sources above"
fi

step "cmake --install into $P"
cmake --install "$BUILD" --prefix "$P" >"$T/install.log" 2>&1 || { cat "$T/install.log"; fail "cmake --install"; }
ing_check_programs "$SRC" "$P" bin
[ -x "$P/sbin/ingest-hugepages" ] || fail "sbin/ingest-hugepages not installed"
for f in include/ingest/producer.h lib/pkgconfig/ingest.pc lib/cmake/ingest/ingestConfig.cmake \
	lib/cmake/ingest/ingestConfigVersion.cmake lib/cmake/ingest/ingestTargets.cmake \
	etc/h3000/ingestd.conf lib/systemd/system/ingestd.service lib/systemd/system/ingest-hugepages.service \
	lib/sysusers.d/h3000-ingest.conf share/doc/h3000-ingest/README.md share/man/man8/ingest-hugepages.8.gz; do
	[ -f "$P/$f" ] || fail "$f not installed"
done
grep -qx "ExecStart=$P/sbin/ingest-hugepages --config $P/etc/h3000/ingestd.conf" \
	"$P/lib/systemd/system/ingest-hugepages.service" || fail "ingest-hugepages.service does not run $P/sbin/ingest-hugepages"
"$P/sbin/ingest-hugepages" --help | grep "default $P/etc/h3000/ingestd.conf" >/dev/null ||
	fail "the installed ingest-hugepages does not default to the prefix's config"
grep -qF "note: systemd does not look in $P/lib/systemd/system: systemctl link $P/lib/systemd/system/ingestd.service" \
	"$T/install.log" || fail "the install did not say how to make systemd see the unit: $(cat "$T/install.log" | tail -3)"

step "README's service user command: systemd-sysusers on the installed entry (in a scratch root)"
mkdir -p "$T/sysroot/etc"
systemd-sysusers --root="$T/sysroot" "$P/lib/sysusers.d/h3000-ingest.conf" >"$T/sysusers.log" 2>&1 ||
	{ cat "$T/sysusers.log"; fail "systemd-sysusers $P/lib/sysusers.d/h3000-ingest.conf"; }
grep -Eq '^h3000:x:[0-9]+:[0-9]+:h3000 ingest node:/var/lib/h3000:/usr/sbin/nologin$' "$T/sysroot/etc/passwd" ||
	fail "systemd-sysusers made no system user h3000: $(cat "$T/sysroot/etc/passwd")"

step "the default prefix /usr/local (DESTDIR): units where systemd looks"
DESTDIR=$T/root cmake --install "$BUILD" --prefix /usr/local >"$T/install2.log" 2>&1 ||
	{ cat "$T/install2.log"; fail "DESTDIR install"; }
U=$T/root/usr/local/lib/systemd/system/ingestd.service
[ -f "$U" ] || fail "no $U"
grep -qx 'ExecStart=/usr/local/bin/ingestd --config /usr/local/etc/h3000/ingestd.conf' "$U" ||
	fail "the /usr/local unit: $(grep ExecStart "$U")"
systemd-analyze unit-paths | grep -qx /usr/local/lib/systemd/system ||
	fail "systemd does not search /usr/local/lib/systemd/system here"
if grep -q 'note: systemd does not look' "$T/install2.log"; then fail "a note for /usr/local"; fi
DESTDIR=$T/root3 ING_UNITDIR=/etc/systemd/system cmake --install "$BUILD" --prefix /opt/h3000 >"$T/install3.log" 2>&1 ||
	{ cat "$T/install3.log"; fail "install with ING_UNITDIR"; }
grep -qx 'ExecStart=/opt/h3000/bin/ingestd --config /opt/h3000/etc/h3000/ingestd.conf' \
	"$T/root3/etc/systemd/system/ingestd.service" || fail "ING_UNITDIR=/etc/systemd/system: no unit there for /opt/h3000"
[ "$(readlink "$P/lib/libingest.so")" = libingest.so.1 ] || fail "libingest.so is not a link to libingest.so.1"
real=$(readlink "$P/lib/libingest.so.1") || fail "libingest.so.1 is not a symlink"
[[ $real == libingest.so.1.* ]] && [ -f "$P/lib/$real" ] || fail "libingest.so.1 -> $real"
soname=$(readelf -d "$P/lib/libingest.so.1" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = libingest.so.1 ] || fail "SONAME is '$soname'"
grep -qx "ExecStart=$P/bin/ingestd --config $P/etc/h3000/ingestd.conf" \
	"$P/lib/systemd/system/ingestd.service" ||
	fail "the unit does not start $P/bin/ingestd --config $P/etc/h3000/ingestd.conf"
for m in ingestd ingest-send ingest-verify ingest-topo ingest-doctor ingest-bench ingest-stat ingest-catalog; do
	zcat "$P/share/man/man1/$m.1.gz" | grep '^\.TH' >/dev/null || fail "man page $m.1.gz missing or empty"
done
zcat "$P/share/man/man1/ingestd.1.gz" | grep -F 'data\-dir' >/dev/null || fail "ingestd(1) lacks its options"

step "no test hooks in what is installed"
for f in "$P/lib/libingest.so.1" "$P"/bin/*; do
	if strings "$f" | grep -E 'ING_TEST_|TEST HOOK'; then fail "$f carries test hooks"; fi
done

step "DPDK, SQLite, hwloc stay private"
needed=$(readelf -d "$P/lib/libingest.so.1" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "libingest.so.1 needs: $needed"
if grep -Eq 'rte_|dpdk|sqlite|hwloc|numa' <<<"$needed"; then fail "libingest needs $needed"; fi
export PKG_CONFIG_PATH=$P/lib/pkgconfig PKG_CONFIG_LIBDIR=/nonexistent
flags=$(pkg-config --cflags --libs ingest) || fail "pkg-config ingest"
echo "pkg-config --cflags --libs ingest: $flags"
[ "$(pkg-config --modversion ingest)" = "$(sed -n 's/^Version: //p' "$P/lib/pkgconfig/ingest.pc")" ] || fail "modversion"
for w in $flags; do
	case $w in -I*|-L*|-lingest) ;; *) fail "unexpected flag $w from ingest.pc" ;; esac
done
printf '#include <ingest/producer.h>\nint main(void) { return ing_crc32c(0, "123456789", 9) == 0xe3069283u ? 0 : 1; }\n' >"$T/alone.c"
cc -std=c11 -Wall -Wextra -Werror -pedantic "$T/alone.c" $flags -Wl,-rpath,"$P/lib" -o "$T/alone" ||
	fail "the installed header does not compile on its own"
"$T/alone" || fail "ing_crc32c from the installed library is wrong"

step "downstream program, built with pkg-config"
# shellcheck disable=SC2086
cc -std=c11 -O2 -Wall -Werror "$SRC/tests/package/consumer/consumer.c" $(pkg-config --cflags --libs ingest) \
	-Wl,-rpath,"$(pkg-config --variable=libdir ingest)" -o "$T/consumer-pc" || fail "cc with pkg-config"
step "downstream program, built with find_package(ingest)"
cmake -S "$SRC/tests/package/consumer" -B "$T/cmake-build" -DCMAKE_PREFIX_PATH="$P" \
	-DCMAKE_BUILD_TYPE=Release >"$T/cmake.log" 2>&1 || { cat "$T/cmake.log"; fail "cmake find_package(ingest)"; }
cmake --build "$T/cmake-build" >>"$T/cmake.log" 2>&1 || { cat "$T/cmake.log"; fail "cmake --build of the consumer"; }
for c in "$T/consumer-pc" "$T/cmake-build/consumer"; do
	got=$(ldd "$c" | awk '$1 == "libingest.so.1" { print $3 }')
	[ -n "$got" ] && [ "$(realpath "$got")" = "$(realpath "$P/lib/libingest.so.1")" ] ||
		fail "$c does not load $P/lib/libingest.so.1: $(ldd "$c")"
done

step "both send frames to the installed ingestd"
ing_start "$P/bin/ingestd" "$T/port" "$T/ingestd.log" --data-dir "$T/data" --pool 1M:8 --workers 1
PID=$ING_PID
timeout 60 "$T/consumer-pc" "$ING_SERVER" PKG-pc 1 12 || fail "consumer (pkg-config) exited $?"
timeout 60 "$T/cmake-build/consumer" "$ING_SERVER" PKG-cmake 101 12 || fail "consumer (cmake) exited $?"
[ "$(find "$T/data/frames/PKG-pc" "$T/data/frames/PKG-cmake" -name '*.frame' | wc -l)" = 24 ] ||
	fail "expected 24 stored frames"
timeout 60 "$P/bin/ingest-send" --server "$ING_SERVER" --transport grpc --count 5 --size 300K --first-id 501 \
	--wafer PKG-send --manifest "$T/m" --json --quiet >"$T/send.json" || fail "installed ingest-send exited $?"
timeout 60 "$P/bin/ingest-verify" --data-dir "$T/data" --manifest "$T/m" --quiet || fail "installed ingest-verify"

step "a client generated from the installed protos (share/h3000-ingest/proto)"
for p in h3000.proto health.proto; do
	cmp -s "$P/share/h3000-ingest/proto/$p" "$SRC/proto/$p" || fail "share/h3000-ingest/proto/$p is not proto/$p"
done
mkdir -p "$T/stubs"
PY3=/usr/bin/python3   # Debian's, with python3-grpcio and python3-grpc-tools (deploy/install-deps.sh)
"$PY3" -m grpc_tools.protoc -I "$P/share/h3000-ingest/proto" --python_out "$T/stubs" --grpc_python_out "$T/stubs" \
	"$P/share/h3000-ingest/proto/h3000.proto" "$P/share/h3000-ingest/proto/health.proto" || fail "protoc on the installed protos"
timeout 60 "$PY3" - "$T/stubs" "$ING_SERVER" <<'PY' || fail "the client generated from the installed protos"
import sys
sys.path.insert(0, sys.argv[1])
import grpc, h3000_pb2 as pb, h3000_pb2_grpc as rpc, health_pb2, health_pb2_grpc
ch = grpc.insecure_channel(sys.argv[2])
svc = rpc.RDMASvcStub(ch)
n = svc.Negotiate(pb.NegotiateRequest(versionMin=1, versionMax=1, clientName="installed-protos",
                                      transports=[pb.TRANSPORT_GRPC_STREAM]), timeout=10)
data = bytes(range(256)) * 256   # 64 KiB
def chunks():
    for i in range(3):
        fid = "proto-%d" % i
        yield pb.FrameChunk(frameId=fid, offset=0, last=True, data=data,
                            meta=pb.FrameMeta(frameId=fid, waferId="PKG-proto", length=len(data)))
acks = [a for a in svc.PushFrames(chunks(), metadata=[("h3000-session-id", str(n.sessionId))], timeout=30)]
stored = sorted(a.frameId for a in acks if a.stored)
h = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
print("installed protos: session %d, %d of 3 frames stored, health %s" %
      (n.sessionId, len(stored), health_pb2.HealthCheckResponse.ServingStatus.Name(h.status)))
sys.exit(0 if stored == ["proto-0", "proto-1", "proto-2"] and h.status == health_pb2.HealthCheckResponse.SERVING else 1)
PY
# what the node holds, read back: the three files byte for byte
python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 256)' >"$T/proto.bin"
for i in 0 1 2; do
	cmp -s "$T/data/frames/PKG-proto/proto-$i.frame" "$T/proto.bin" || fail "PKG-proto/proto-$i.frame is not the frame sent"
done

step "ABI promises from a downstream program (older and newer struct sizes, version, errors, logs)"
cc -std=c11 -O2 -Wall -Werror "$SRC/tests/package/consumer/abi_compat.c" $(pkg-config --cflags --libs ingest) \
	-Wl,-rpath,"$P/lib" -o "$T/abi_compat" || fail "cc abi_compat"
timeout 60 "$T/abi_compat" "$ING_SERVER" abi 2>"$T/abi.err" || fail "abi_compat exited $? (stderr: $(cat "$T/abi.err"))"
[ ! -s "$T/abi.err" ] || fail "libingest wrote to stderr despite the log handler: $(cat "$T/abi.err")"

step "SIGTERM: ingestd exits 0"
kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
[ "$rc" = 0 ] || fail "ingestd exited $rc"
echo "PASS: installed, consumed with pkg-config and find_package(ingest)"
