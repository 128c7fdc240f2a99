#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# systemd.sh BUILD_DIR SRC_DIR - deploy/ingestd.service as systemd sees it:
#  1. `systemd-analyze verify` on the unit (in a temp copy whose ExecStartPre/ExecStart
#     point at the built programs, which verify requires to exist) prints nothing, exit 0;
#  2. the same with a misspelt directive is reported (the check is real, not a no-op);
#  3. the unit is Type=notify with a WatchdogSec and runs ingestd --config on the
#     config file that deploy/ ships, which --check-config accepts; it runs as the service
#     user h3000 and a config error (exit 2) does not restart it;
#  4. ingest-hugepages.service (filled in the same way) verifies and runs the built
#     ingest-hugepages on the same config.
# (The man pages its Documentation= names are checked where they are installed:
# package.deb_install verifies the installed unit with them.)
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

SRC=$(cd "${2:?usage: systemd.sh BUILD_DIR SRC_DIR}" && pwd)
command -v systemd-analyze >/dev/null || { echo "FAIL: systemd-analyze not installed (Debian package systemd)" >&2; exit 1; }
ing_test_setup ops-systemd "${1:-}" ingest-doctor
# the unit as shipped, or its template filled in at install time (@ING_BINDIR@, ...)
UNIT=$SRC/deploy/ingestd.service
[ -f "$UNIT" ] || UNIT=$SRC/deploy/ingestd.service.in

step "1. systemd-analyze verify"
sed -e "s#/usr/local/bin/ingest-doctor#$DOCTOR#g" -e "s#/usr/local/bin/ingestd#$INGESTD#g" \
	-e "s#@ING_BINDIR@/ingest-doctor#$DOCTOR#g" -e "s#@ING_BINDIR@/ingestd#$INGESTD#g" \
	-e "s#@ING_SYSCONFDIR@#/etc#g" "$UNIT" >"$TMP/ingestd.service"
grep -q "$INGESTD" "$TMP/ingestd.service" || fail "no ExecStart=/usr/local/bin/ingestd in $UNIT"
systemd-analyze verify --man=no "$TMP/ingestd.service" >"$TMP/out" 2>&1
rc=$?
[ "$rc" = 0 ] && [ ! -s "$TMP/out" ] || fail "systemd-analyze verify (exit $rc): $(cat "$TMP/out")"
echo "ok: systemd-analyze verify is clean"

step "2. a broken copy is caught"
sed -e 's/^WatchdogSec=/WatchdogSecs=/' "$TMP/ingestd.service" >"$TMP/broken.service"
systemd-analyze verify --man=no "$TMP/broken.service" >"$TMP/out" 2>&1
grep -q "WatchdogSecs" "$TMP/out" || fail "a misspelt directive went unreported: $(cat "$TMP/out")"
echo "ok: reported: $(grep WatchdogSecs "$TMP/out" | head -1)"

step "3. Type=notify, watchdog, ingestd --config with the shipped config"
grep -qx 'Type=notify' "$UNIT" || fail "the unit is not Type=notify"
grep -Eqx 'WatchdogSec=[0-9]+s?' "$UNIT" || fail "the unit has no WatchdogSec"
conf=$(sed -n 's#^ExecStart=.* --config \([^ ]*\).*#\1#p' "$TMP/ingestd.service")
[ "$conf" = /etc/h3000/ingestd.conf ] || fail "ExecStart does not read /etc/h3000/ingestd.conf"
"$INGESTD" --config "$SRC/deploy/ingestd.conf" --check-config >"$TMP/out" 2>&1 \
	|| fail "deploy/ingestd.conf: $(cat "$TMP/out")"
echo "ok: $(cat "$TMP/out")"
grep -qx 'User=h3000' "$UNIT" || fail "the unit does not run as the service user h3000"
grep -qx 'RestartPreventExitStatus=2' "$UNIT" || fail "a config error (exit 2) would restart in a loop"
grep -qx 'LimitMEMLOCK=infinity' "$UNIT" || fail "no LimitMEMLOCK=infinity (RDMA pins the pool)"

step "4. ingest-hugepages.service"
HP=$BUILD/deploy/ingest-hugepages
ing_need_built "$HP"
sed -e "s#@ING_SBINDIR@/ingest-hugepages#$HP#g" -e "s#@ING_SYSCONFDIR@#$SRC/deploy#g" \
	"$SRC/deploy/ingest-hugepages.service.in" | sed -e "s#$SRC/deploy/h3000/ingestd.conf#$SRC/deploy/ingestd.conf#" \
	>"$TMP/ingest-hugepages.service"
systemd-analyze verify --man=no "$TMP/ingest-hugepages.service" >"$TMP/out" 2>&1
rc=$?
[ "$rc" = 0 ] && [ ! -s "$TMP/out" ] || fail "systemd-analyze verify ingest-hugepages.service (exit $rc): $(cat "$TMP/out")"
cmd=$(sed -n 's/^ExecStart=//p' "$TMP/ingest-hugepages.service")
# shellcheck disable=SC2086
$cmd --check >"$TMP/out" 2>&1
grep -q 'the pool needs 224' "$TMP/out" || fail "ingest-hugepages on deploy/ingestd.conf: $(cat "$TMP/out")"
echo "ok: $(cat "$TMP/out")"
echo "PASS: systemd units"
