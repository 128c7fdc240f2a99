#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deps_sets.sh SRC_DIR - deploy/install-deps.sh's sets, as `make` uses them (nothing is
# installed: --list and make -n only):
#  1. demo is the build set plus the few tools the demo runs, and none of the test stack
#     (PostgreSQL, Prometheus, Ceph, qemu, clang, Node.js); demo-tier adds the single-node
#     Ceph and its clients; all holds every other set;
#  2. `make demo` installs the demo set (demo-tier with TIER=1), never `all`; `make install`
#     the build set.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
SRC=$(cd "${1:?usage: deps_sets.sh SRC_DIR}" && pwd)
D=$SRC/deploy/install-deps.sh
fail() { echo "FAIL: $*" >&2; exit 1; }
list() { "$D" "$1" --list | grep -v '^#' | sort; }

step "1. the sets"
build=$(list build) demo=$(list demo) tier=$(list demo-tier) all=$(list all)
[ -n "$build" ] && [ -n "$demo" ] || fail "empty sets"
missing=$(comm -23 <(echo "$build") <(echo "$demo"))
[ -z "$missing" ] || fail "the demo set lacks build packages: $missing"
extra=$(comm -13 <(echo "$build") <(echo "$demo") | paste -sd' ')
bad=$(echo "$demo" | grep -E '^(postgresql|prometheus|ceph|radosgw|qemu|clang|libfuzzer|nodejs|npm|lintian|abigail)' | paste -sd' ')
[ -z "$bad" ] || fail "the demo set installs the test stack: $bad"
[ "$(echo "$extra" | wc -w)" -le 3 ] || fail "the demo set adds more than a few tools to the build set: $extra"
missing=$(comm -23 <(echo "$demo") <(echo "$tier"))
[ -z "$missing" ] || fail "demo-tier lacks demo packages: $missing"
for p in ceph-mon ceph-osd radosgw python3-boto3; do
	grep -qx "$p" <<<"$tier" || fail "demo-tier lacks $p (tests/tier/ceph_lib.sh needs it)"
done
if grep -Eq '^(postgresql|prometheus|qemu|clang|nodejs)' <<<"$tier"; then fail "demo-tier installs the test stack"; fi
missing=$(comm -23 <(echo "$tier") <(echo "$all"))
[ -z "$missing" ] || fail "all lacks: $missing"
[ "$(echo "$all" | uniq -d)" = "" ] || fail "all lists a package twice: $(echo "$all" | uniq -d)"
echo "ok: build $(echo "$build" | wc -l), demo +[$extra], demo-tier +$(comm -13 <(echo "$demo") <(echo "$tier") | wc -l) (Ceph), all $(echo "$all" | wc -l) packages"
"$D" nonsense >/dev/null 2>&1
[ $? = 2 ] || fail "install-deps.sh nonsense: not exit 2"

step "2. what make runs"
m=$(make -s -n -C "$SRC" demo BUILD=/nonexistent-build 2>&1) || fail "make -n demo: $m"
grep -qx 'deploy/install-deps.sh demo' <<<"$m" || fail "make demo does not run install-deps.sh demo: $m"
if grep -q 'install-deps.sh all' <<<"$m"; then fail "make demo runs install-deps.sh all"; fi
m=$(make -s -n -C "$SRC" demo TIER=1 BUILD=/nonexistent-build 2>&1) || fail "make -n demo TIER=1: $m"
grep -qx 'deploy/install-deps.sh demo-tier' <<<"$m" || fail "make demo TIER=1 does not run install-deps.sh demo-tier"
grep -q 'deploy/demo.sh /nonexistent-build --tier' <<<"$m" || fail "make demo TIER=1 does not run demo.sh --tier"
m=$(make -s -n -C "$SRC" install BUILD=/nonexistent-build 2>&1) || fail "make -n install: $m"
grep -qx 'deploy/install-deps.sh build' <<<"$m" || fail "make install does not run install-deps.sh build"
if grep -Eq 'install-deps.sh (all|deb)' <<<"$m"; then fail "make install installs more than the build set"; fi
echo "ok: make demo -> install-deps.sh demo, TIER=1 -> demo-tier, make install -> build"
echo "PASS: dependency sets"
