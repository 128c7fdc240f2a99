#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deb.sh BUILD_DIR SRC_DIR - the Debian packages (what `make deb` builds), never installed
# onto this machine:
#  1. cpack -G DEB builds h3000-ingest and h3000-ingest-dev; lintian reports no error;
#  2. runtime Depends come from dpkg-shlibdeps (verbs, rdma_cm, nghttp2, SQLite, ...; DPDK
#     is linked in statically, so no DPDK package); -dev depends on the same version;
#  3. both are unpacked into a throwaway root (dpkg-deb -x): the unit starts /usr/bin/ingestd
#     and reads /etc/h3000/ingestd.conf (a conffile), man pages are there; -dev carries the
#     gRPC protocol (/usr/share/h3000-ingest/proto: the source's h3000.proto, health.proto);
#  4. README's program table against the package: every program in usr/bin with its man
#     page and bash completion, and no program the table lacks;
#  5. the unpacked ingestd, ingest-send, ingest-verify and ingest-get run end to end on 127.0.0.1
#     (LD_LIBRARY_PATH into the root), and a program built against the unpacked -dev
#     package's ingest.pc sends frames through the unpacked libingest.so.1.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
BUILD=$(cd "${1:?usage: deb.sh BUILD_DIR SRC_DIR}" && pwd)
SRC=$(cd "${2:?usage: deb.sh BUILD_DIR SRC_DIR}" && pwd)
T=$(mktemp -d /tmp/ing-deb.XXXXXX)
R=$T/root
PID=
cleanup() { ing_kill_pid; rm -rf "$T"; }
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	tail -n 30 "$T/ingestd.log" >&2 2>/dev/null || true
	exit 1
}
for t in cpack lintian dpkg-deb; do
	command -v "$t" >/dev/null || fail "$t not installed (deploy/install-deps.sh installs it)"
done

step "cpack -G DEB"
(cd "$BUILD" && cpack -G DEB -B "$T/out") >"$T/cpack.log" 2>&1 || { cat "$T/cpack.log"; fail "cpack"; }
RT=$(ls "$T"/out/h3000-ingest_*.deb) && DEV=$(ls "$T"/out/h3000-ingest-dev_*.deb) || fail "no .debs: $(ls "$T/out")"
echo "$(basename "$RT") $(basename "$DEV")"

step "lintian: no errors"
lintian --tag-display-limit 0 "$RT" "$DEV" >"$T/lintian.txt" 2>&1 || true
cat "$T/lintian.txt"
if grep -q '^E: ' "$T/lintian.txt"; then fail "lintian reports errors"; fi
grep -Eq '^(W|E|I|N): h3000' "$T/lintian.txt" || [ ! -s "$T/lintian.txt" ] || grep -q 'root privileges' "$T/lintian.txt" ||
	fail "lintian did not run: $(cat "$T/lintian.txt")"

step "dependencies"
dep=$(dpkg-deb -f "$RT" Depends)
echo "h3000-ingest Depends: $dep"
for p in libibverbs1 librdmacm1 libnghttp2-14 libprotobuf-c1 libsqlite3-0 libhwloc15 libssl3 libc6; do
	grep -q "\b$p\b" <<<"$dep" || fail "h3000-ingest does not depend on $p"
done
if grep -qi dpdk <<<"$dep"; then fail "h3000-ingest depends on DPDK packages"; fi
ver=$(dpkg-deb -f "$RT" Version)
[ "$(dpkg-deb -f "$DEV" Depends)" = "h3000-ingest (= $ver)" ] || fail "-dev Depends: $(dpkg-deb -f "$DEV" Depends)"
dpkg-deb --ctrl-tarfile "$RT" | tar -xO ./conffiles | grep -qx /etc/h3000/ingestd.conf || fail "ingestd.conf is not a conffile"

step "unpack into $R"
dpkg-deb -x "$RT" "$R"
dpkg-deb -x "$DEV" "$R"
for f in usr/bin/ingestd usr/bin/ingest-send usr/bin/ingest-verify usr/bin/ingest-topo usr/bin/ingest-doctor \
	usr/lib/libingest.so.1 usr/include/ingest/producer.h usr/lib/pkgconfig/ingest.pc \
	usr/lib/cmake/ingest/ingestConfig.cmake etc/h3000/ingestd.conf lib/systemd/system/ingestd.service \
	usr/share/man/man1/ingestd.1.gz usr/share/doc/h3000-ingest/copyright; do
	[ -e "$R/$f" ] || fail "/$f not in the packages"
done
# the listing read whole first: grep -q's early exit would kill dpkg-deb with SIGPIPE, which
# pipefail turns into a failure for a package that has the file
dpkg-deb -c "$DEV" >"$T/dev.list"
for p in h3000.proto health.proto; do
	grep -q " \./usr/share/h3000-ingest/proto/$p\$" "$T/dev.list" || fail "/usr/share/h3000-ingest/proto/$p not in h3000-ingest-dev"
	cmp -s "$R/usr/share/h3000-ingest/proto/$p" "$SRC/proto/$p" || fail "/usr/share/h3000-ingest/proto/$p is not proto/$p"
done
grep -qx 'ExecStart=/usr/bin/ingestd --config /etc/h3000/ingestd.conf' "$R/lib/systemd/system/ingestd.service" ||
	fail "the unit does not start /usr/bin/ingestd --config /etc/h3000/ingestd.conf: $(grep Exec "$R/lib/systemd/system/ingestd.service")"

step "README's program table against the package"
ing_check_programs "$SRC" "$R/usr" bin
bash -n "$R/usr/share/bash-completion/completions/ingestd" || fail "ingestd's completion is not valid bash"

step "the unpacked programs end to end"
export LD_LIBRARY_PATH=$R/usr/lib
ing_start "$R/usr/bin/ingestd" "$T/port" "$T/ingestd.log" --data-dir "$T/data" --pool 1M:8 --workers 1
PID=$ING_PID
timeout 60 "$R/usr/bin/ingest-send" --server "$ING_SERVER" --transport grpc --count 16 --sizes 64K-1M \
	--first-id 1 --wafer DEB-w1 --manifest "$T/m" --json --quiet >"$T/send.json" ||
	fail "unpacked ingest-send exited $?"
cat "$T/send.json"; echo
[ "$(json "$T/send.json" 'ok')" = 16 ] || fail "not 16 frames ok"
timeout 60 "$R/usr/bin/ingest-verify" --data-dir "$T/data" --manifest "$T/m" --quiet || fail "unpacked ingest-verify"
# any frame back, compared with the node's own file of it
timeout 60 "$R/usr/bin/ingest-get" --server "$ING_SERVER" --wafer DEB-w1 --frame frame-1 --out "$T/f1" ||
	fail "unpacked ingest-get exited $?"
cmp "$T/f1" "$T/data/frames/DEB-w1/frame-1.frame" || fail "ingest-get's frame-1 differs from the node's file"

step "a program built against the unpacked -dev package"
export PKG_CONFIG_PATH=$R/usr/lib/pkgconfig PKG_CONFIG_LIBDIR=/nonexistent
# shellcheck disable=SC2086
cc -std=c11 -O2 -Wall -Werror "$SRC/tests/package/consumer/consumer.c" $(pkg-config --cflags --libs ingest) \
	-o "$T/consumer" || fail "cc against the unpacked ingest.pc"
got=$(ldd "$T/consumer" | awk '$1 == "libingest.so.1" { print $3 }')
[ "$(realpath "$got")" = "$(realpath "$R/usr/lib/libingest.so.1")" ] || fail "consumer loads '$got'"
timeout 60 "$T/consumer" "$ING_SERVER" DEB-w2 1001 8 || fail "consumer exited $?"

kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
[ "$rc" = 0 ] || fail "unpacked ingestd exited $rc on SIGTERM"
echo "PASS: h3000-ingest + h3000-ingest-dev: lintian clean, unpacked programs work"
