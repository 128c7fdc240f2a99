#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# print_config.sh BUILD_DIR - ingestd --print-config, as an operator uses it (what does this
# node run with?):
#  1. a config file and flags: the output has the file's settings, the flags' (which win),
#     the defaults of the rest, and unset ones as comments; secrets (a fleet-db password)
#     never appear;
#  2. round trip: the output, given back as --config, passes --check-config and prints the
#     same settings again;
#  3. a node started from the output stores frames where it says (data-dir, credits).
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

ing_test_setup ops-printconf "${1:-}" ingest-send

cat >"$TMP/in.conf" <<CONF
listen = 127.0.0.1:0   # any port
data-dir = $TMP/from-file
pool = 1M:8,4M:2
workers = 1
credits = 8
frame-timeout = 1m30s
session-idle = 2h30m
fleet-db = host=db.example dbname=fleet password=hunter2-secret
log-format = json
drain
CONF

step "1. the file, the flags and the defaults merged"
"$INGESTD" --config "$TMP/in.conf" --data-dir "$TMP/from-flag" --credits 5 --print-config \
	>"$TMP/out1.conf" 2>"$TMP/err" || fail "--print-config exited $?: $(cat "$TMP/err")"
cat "$TMP/out1.conf"
has() { grep -qx -- "$1" "$TMP/out1.conf" || fail "--print-config lacks the line '$1'"; }
has "data-dir = $TMP/from-flag"          # the flag wins over the file
has "credits = 5"
has "pool = 1M:8,4M:2"                   # from the file
has "frame-timeout = 90s"
has "session-idle = 150m"
has "log-format = json"
has "drain = on"
has "rdma-port = 7472"                   # defaults
has "max-sessions = 4096"
has "# tls-cert =   (not set: the default)"
grep -q "hunter2" "$TMP/out1.conf" && fail "the fleet-db password is printed"
grep -q "^# fleet-db = host=db.example dbname=fleet password=<redacted>" "$TMP/out1.conf" ||
	fail "fleet-db is not there with its password redacted"
echo "ok: flags over the file over the defaults; the password redacted"

step "2. round trip"
grep -v "^# fleet-db" "$TMP/out1.conf" >"$TMP/rt.conf"
"$INGESTD" --config "$TMP/rt.conf" --check-config >"$TMP/check" 2>&1 ||
	fail "the printed settings do not pass --check-config: $(cat "$TMP/check")"
"$INGESTD" --config "$TMP/rt.conf" --print-config >"$TMP/out2.conf" 2>"$TMP/err" ||
	fail "--print-config of the printed file exited $?: $(cat "$TMP/err")"
diff <(grep -v '^#' "$TMP/rt.conf") <(grep -v '^#' "$TMP/out2.conf") >"$TMP/diff" ||
	fail "printed again, the settings differ: $(cat "$TMP/diff")"
echo "ok: --config of the output prints the same $(grep -vc '^#\|^$' "$TMP/out2.conf") settings"

step "3. a node from the printed file"
sed -i -e 's/^drain = on/drain = off/' -e "s|^listen = .*|listen = 127.0.0.1:0|" "$TMP/rt.conf"
echo "port-file = $TMP/port" >>"$TMP/rt.conf"
"$INGESTD" --config "$TMP/rt.conf" >"$TMP/ingestd.log" 2>&1 &
PID=$!
ing_wait_port "$PID" "$TMP/port" "$TMP/ingestd.log"
"$SEND" --server "$ING_SERVER" --count 3 --sizes 64K --quiet >"$TMP/send" 2>&1 || fail "ingest-send: $(cat "$TMP/send")"
[ "$(find "$TMP/from-flag/frames" -name '*.frame' | wc -l)" = 3 ] || fail "the frames are not in $TMP/from-flag"
grep -q '"credits 5' "$TMP/ingestd.log" || grep -q 'credits 5,' "$TMP/ingestd.log" || fail "credits 5 not in force"
ing_term_pid
echo "PASS: --print-config"
