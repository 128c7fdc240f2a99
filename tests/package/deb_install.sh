#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deb_install.sh BUILD_DIR SRC_DIR - the .debs installed onto this machine and removed again,
# as an operator does it (apt install ./x.deb, apt remove, apt purge), root only:
#  1. apt installs h3000-ingest + h3000-ingest-dev; the postinst created the system user
#     h3000 (no login shell, home /var/lib/h3000) and /var/lib/h3000 (h3000, 0750);
#  2. what the messages point to is there: ingest-hugepages, ingest-bench, the docs, man
#     pages; both units pass `systemd-analyze verify` with the installed programs, and
#     `systemd-analyze security` rates ingestd.service 4.0 or less ("OK" or better);
#  3. the unit's own command lines run as h3000 (memlock as the unit sets it): its
#     ExecStartPre (ingest-doctor) finds no FAIL, its ExecStart's config passes
#     --check-config, and the installed ingestd stores frames as h3000 (files owned by it);
#  4. apt remove: programs and units gone, the conffile and the user stay;
#     apt purge: the conffile, /etc/h3000, /var/lib/h3000, the user and group gone, dpkg
#     knows nothing of the packages;
#  5. a second install, then purge with a stored frame in /var/lib/h3000: the frames and
#     the user are kept, and the purge says so (then the test removes them).
# Serialised with any other run of it by a lock (it changes the machine's package state).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
BUILD=$(cd "${1:?usage: deb_install.sh BUILD_DIR SRC_DIR}" && pwd)
SRC=$(cd "${2:?usage: deb_install.sh BUILD_DIR SRC_DIR}" && pwd)
T=$(mktemp -d /tmp/ing-debinst.XXXXXX)
chmod 755 "$T"
PID=
fail() {
	echo "FAIL: $*" >&2
	tail -n 30 "$T/ingestd.log" >&2 2>/dev/null || true
	exit 1
}
if [ "$(id -u)" != 0 ]; then
	echo "NOT RUN: package.deb_install installs packages: it needs root"
	exit 77
fi
for t in cpack apt-get dpkg systemd-analyze setpriv; do
	command -v "$t" >/dev/null || fail "$t not installed (deploy/install-deps.sh installs it)"
done
exec 9>/tmp/h3000-deb-install.lock
flock -w 900 9 || fail "another package.deb_install holds /tmp/h3000-deb-install.lock"

APT=(apt-get -o DPkg::Lock::Timeout=600 -y -q)
purge_all() {
	dpkg --purge h3000-ingest-dev h3000-ingest >"$T/purge-trap.log" 2>&1 || true
	rm -rf /var/lib/h3000
	if getent passwd h3000 >/dev/null; then deluser --system --quiet h3000 >/dev/null 2>&1 || true; fi
	if getent group h3000 >/dev/null; then delgroup --system --quiet h3000 >/dev/null 2>&1 || true; fi
}
# Written before the first install, removed once the test has purged: an install found
# with it was left by a run of this test that was killed (its trap never ran).
MARK=/var/lib/h3000-ingest-test.installed
cleanup() {
	ing_kill_pid
	if dpkg-query -W h3000-ingest >/dev/null 2>&1 || getent passwd h3000 >/dev/null; then purge_all; fi
	rm -f "$MARK"
	rm -rf "$T"
}

if [ -e "$MARK" ]; then
	echo "h3000-ingest and user h3000 left by an interrupted run of this test ($MARK): purging them first"
	purge_all
	rm -f "$MARK"
fi
# checked before the trap is set: an operator's own install is never purged by this test
if dpkg-query -W -f='${Status}' h3000-ingest 2>/dev/null | grep -q installed; then
	fail "h3000-ingest is installed on this machine already: this test installs and purges it (apt purge h3000-ingest first)"
fi
if getent passwd h3000 >/dev/null; then
	fail "a user h3000 exists already (not from this package): this test would delete it"
fi
trap cleanup EXIT
: >"$MARK"

step "cpack -G DEB"
(cd "$BUILD" && cpack -G DEB -B "$T/out") >"$T/cpack.log" 2>&1 || { cat "$T/cpack.log"; fail "cpack"; }
RT=$(ls "$T"/out/h3000-ingest_*.deb) && DEV=$(ls "$T"/out/h3000-ingest-dev_*.deb) || fail "no .debs"
chmod 644 "$RT" "$DEV"

install_debs() {
	DEBIAN_FRONTEND=noninteractive "${APT[@]}" install "$RT" "$DEV" >"$T/install.log" 2>&1 ||
		{ cat "$T/install.log"; fail "apt-get install ./$(basename "$RT") ./$(basename "$DEV")"; }
}

step "1. apt-get install ./$(basename "$RT") ./$(basename "$DEV")"
install_debs
dpkg-query -W -f='${Status}\n' h3000-ingest | grep -qx 'install ok installed' || fail "h3000-ingest not installed"
IFS=: read -r _ _ uid gid _ home shell < <(getent passwd h3000) || fail "no user h3000 after install"
echo "user h3000: uid $uid gid $gid home $home shell $shell"
[ "$uid" -lt 1000 ] || fail "h3000 is not a system user (uid $uid)"
[ "$home" = /var/lib/h3000 ] || fail "h3000's home is $home"
case $shell in */nologin|*/false) ;; *) fail "h3000 has a login shell: $shell" ;; esac
[ "$(getent group h3000 | cut -d: -f3)" = "$gid" ] || fail "no group h3000 as h3000's primary group"
[ "$(stat -c '%U:%G %a' /var/lib/h3000)" = "h3000:h3000 750" ] ||
	fail "/var/lib/h3000 is $(stat -c '%U:%G %a' /var/lib/h3000)"

step "2. what the messages point to, and the units"
for f in /usr/bin/ingestd /usr/bin/ingest-send /usr/bin/ingest-verify /usr/bin/ingest-topo \
	/usr/bin/ingest-doctor /usr/bin/ingest-bench /usr/sbin/ingest-hugepages \
	/lib/systemd/system/ingestd.service /lib/systemd/system/ingest-hugepages.service \
	/etc/h3000/ingestd.conf /usr/lib/sysusers.d/h3000-ingest.conf \
	/usr/share/doc/h3000-ingest/README.md /usr/share/doc/h3000-ingest/docs/ARCHITECTURE.md \
	/usr/share/doc/h3000-ingest/docs/OPERATIONS.md /usr/bin/ingest-stat /usr/share/man/man1/ingest-stat.1.gz \
	/usr/bin/ingest-catalog /usr/share/man/man1/ingest-catalog.1.gz \
	/usr/share/doc/h3000-ingest/examples/monitoring/ingest-alerts.yml \
	/usr/share/doc/h3000-ingest/examples/monitoring/ingest-dashboard.json \
	/usr/share/man/man1/ingestd.1.gz /usr/share/man/man1/ingest-bench.1.gz \
	/usr/share/man/man8/ingest-hugepages.8.gz /usr/lib/libingest.so.1 /usr/include/ingest/producer.h; do
	[ -e "$f" ] || fail "$f not installed"
done
/usr/sbin/ingest-hugepages --check --pool 2M:1 >"$T/hp.txt" 2>&1 || true
grep -q 'the pool needs 1' "$T/hp.txt" || fail "installed ingest-hugepages: $(cat "$T/hp.txt")"
/usr/sbin/ingest-hugepages --help | grep '/etc/h3000/ingestd.conf' >/dev/null || fail "ingest-hugepages does not default to /etc/h3000/ingestd.conf"
for u in ingestd.service ingest-hugepages.service; do
	systemd-analyze verify "/lib/systemd/system/$u" >"$T/verify.txt" 2>&1 ||
		fail "systemd-analyze verify $u: $(cat "$T/verify.txt")"
	[ ! -s "$T/verify.txt" ] || fail "systemd-analyze verify $u: $(cat "$T/verify.txt")"
done
systemd-analyze security --offline=yes /lib/systemd/system/ingestd.service >"$T/security.txt" 2>&1 ||
	fail "systemd-analyze security: $(tail -3 "$T/security.txt")"
level=$(sed -n 's/.*Overall exposure level for ingestd.service: \([0-9.]*\) \([A-Z]*\).*/\1 \2/p' "$T/security.txt")
echo "systemd-analyze security ingestd.service: $level"
read -r score verdict <<<"$level"
[ -n "$score" ] || fail "no exposure level in: $(tail -3 "$T/security.txt")"
awk -v s="$score" 'BEGIN { exit !(s <= 4.0) }' || fail "exposure $score $verdict > 4.0"
case $verdict in OK|SAFE|PERFECT) ;; *) fail "exposure verdict $verdict (want OK or better)" ;; esac
grep -qx 'User=h3000' /lib/systemd/system/ingestd.service || fail "the unit does not run as h3000"
grep -qx 'LimitMEMLOCK=infinity' /lib/systemd/system/ingestd.service || fail "no LimitMEMLOCK=infinity"
grep -qx 'RestartPreventExitStatus=2' /lib/systemd/system/ingestd.service || fail "config errors (exit 2) restart"

step "3. the unit's command lines as h3000"
unit_cmd() { sed -n "s/^$1=//p" /lib/systemd/system/ingestd.service; }
pre=$(unit_cmd ExecStartPre)
main=$(unit_cmd ExecStart)
echo "ExecStartPre=$pre"
# LimitMEMLOCK=infinity in the unit: the doctor is told so (raising the hard limit here may
# need CAP_SYS_RESOURCE, which a container's root can lack)
rc=0
# shellcheck disable=SC2086
setpriv --reuid h3000 --regid h3000 --init-groups -- $pre --memlock unlimited >"$T/doctor.txt" 2>&1 || rc=$?
[ "$rc" = 0 ] || { cat "$T/doctor.txt"; fail "the unit's ExecStartPre exits $rc as h3000: the unit would not start"; }
tail -1 "$T/doctor.txt"
# shellcheck disable=SC2086
setpriv --reuid h3000 --regid h3000 --init-groups -- $main --check-config >"$T/check.txt" 2>&1 || fail "ExecStart --check-config: $(cat "$T/check.txt")"
D=$T/data
install -d -o h3000 -g h3000 -m 750 "$D" "$T/run"
PF=$T/run/port
# the unit's ExecStart as h3000, on loopback and a test data dir instead of the config's
# shellcheck disable=SC2086
setpriv --reuid h3000 --regid h3000 --init-groups -- $main --listen 127.0.0.1:0 --port-file "$PF" \
	--metrics-listen 127.0.0.1:0 --data-dir "$D" --pool 1M:8 --workers 1 --log-format text \
	>"$T/ingestd.log" 2>&1 &
PID=$!
ing_wait_port "$PID" "$PF" "$T/ingestd.log"
timeout 60 /usr/bin/ingest-send --server "$ING_SERVER" --transport grpc --count 6 --sizes 64K-1M \
	--wafer DEBI-w1 --manifest "$T/m" --json --quiet >"$T/send.json" || fail "ingest-send exited $?"
[ "$(json "$T/send.json" 'ok')" = 6 ] || fail "not 6 frames ok: $(cat "$T/send.json")"
timeout 60 /usr/bin/ingest-verify --data-dir "$D" --manifest "$T/m" --quiet || fail "ingest-verify"
owners=$(find "$D/frames" "$D/catalog.db" -printf '%u\n' | sort -u | tr '\n' ' ')
[ "$owners" = "h3000 " ] || fail "stored files owned by: $owners"
ing_term_pid

step "4. apt-get remove, then purge"
DEBIAN_FRONTEND=noninteractive "${APT[@]}" remove h3000-ingest-dev h3000-ingest >"$T/remove.log" 2>&1 ||
	{ cat "$T/remove.log"; fail "apt-get remove"; }
for f in /usr/bin/ingestd /usr/sbin/ingest-hugepages /lib/systemd/system/ingestd.service /usr/lib/libingest.so.1; do
	[ ! -e "$f" ] || fail "$f still there after remove"
done
[ -f /etc/h3000/ingestd.conf ] || fail "remove deleted the conffile /etc/h3000/ingestd.conf"
getent passwd h3000 >/dev/null || fail "remove deleted the user h3000 (purge does)"
# -dev has no conffiles: remove left nothing of it to purge
DEBIAN_FRONTEND=noninteractive "${APT[@]}" purge h3000-ingest >"$T/purge.log" 2>&1 ||
	{ cat "$T/purge.log"; fail "apt-get purge"; }
for f in /etc/h3000 /var/lib/h3000 /usr/share/doc/h3000-ingest /usr/lib/sysusers.d/h3000-ingest.conf; do
	[ ! -e "$f" ] || fail "$f still there after purge"
done
if getent passwd h3000 >/dev/null; then fail "purge left the user h3000"; fi
if getent group h3000 >/dev/null; then fail "purge left the group h3000"; fi
if dpkg-query -W h3000-ingest >/dev/null 2>&1 && [ -n "$(dpkg-query -W -f='${Status}' h3000-ingest 2>/dev/null | grep -v not-installed)" ]; then
	fail "dpkg still knows h3000-ingest: $(dpkg-query -W -f='${Status}' h3000-ingest)"
fi
echo "ok: purged clean"

step "5. purge keeps stored frames (and their owner)"
install_debs
install -d -o h3000 -g h3000 /var/lib/h3000/frames/w1
echo data >/var/lib/h3000/frames/w1/f1.frame
DEBIAN_FRONTEND=noninteractive "${APT[@]}" purge h3000-ingest-dev h3000-ingest >"$T/purge2.log" 2>&1 ||
	{ cat "$T/purge2.log"; fail "apt-get purge (frames stored)"; }
grep -q '/var/lib/h3000 holds stored frames: kept' "$T/purge2.log" || fail "the purge did not say it kept the frames: $(cat "$T/purge2.log")"
[ -f /var/lib/h3000/frames/w1/f1.frame ] || fail "purge deleted a stored frame"
getent passwd h3000 >/dev/null || fail "purge deleted the owner of the kept frames"
purge_all
echo "PASS: .debs install (user h3000, units verify, exposure $score $verdict), run as h3000, remove and purge clean"
