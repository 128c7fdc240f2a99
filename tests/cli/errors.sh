#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# errors.sh BUILD_DIR - the usual mistakes of a new site engineer, each made for real, each
# message checked for the words that say what is wrong and the fix, and the exit status
# (2: usage or configuration, 1: runtime), and that nothing was lost or started:
#  1. --pool larger than memory: --check-config and a real start both refuse it with the
#     numbers and the fix, before the data dir is touched;
#  2. a data dir that is a file: --check-config fails (flag and config file), and a real
#     start says the same sentence (exit 1, one ERR line), nothing started;
#  3. a port in use: said as the last line, before EAL and the pool;
#  4. cleartext client against a TLS node and the reverse, a certificate without the
#     name dialled, no auth token: each says which it is and what to give;
#  5. no node there: said once, with the hint;
#  6. a conflict: named (frame, wafer, "already stored with another CRC-32C"), the stored
#     frame intact;
#  7. a frame over the node's maximum: the file named, nothing sent;
#  8. ingest-bench against a dead node: exit 1, no report; a --sizes range sweeps;
#  9. ingest-doctor --config: ingestd's file, its pool checked; a bad key is FILE:LINE;
# 10. ingest-verify in a directory that is no data dir: exit 1 with the hint;
# 11. --check-config catches what a start would trip on: a TLS key that is not the
#     certificate's (and a real start says the same, exit 2), max-frame above the largest
#     pool slot, --tier http:// (the scheme it takes named, and the corrected URL).
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

BUILD=$(cd "${1:?usage: errors.sh BUILD_DIR}" && pwd)
A=$BUILD/apps
INGESTD=$A/ingestd SEND=$A/ingest-send VERIFY=$A/ingest-verify BENCH=$A/ingest-bench
DOCTOR=$A/ingest-doctor
ing_need_built "$INGESTD" "$SEND" "$VERIFY" "$BENCH" "$DOCTOR"
command -v openssl >/dev/null || { echo "FAIL: openssl is missing" >&2; exit 1; }
TMP=$(mktemp -d /tmp/cli-errors.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	tail -n 20 "$TMP"/*.log >&2 2>/dev/null
	exit 1
}
n=0

# run PROG ARGS...: stdout $TMP/out, stderr $TMP/err, exit status $rc
run() {
	rc=0
	timeout 60 "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
}
# expect WANT_RC TEXT...: the last run exited WANT_RC and its stderr has every TEXT
expect() {
	local want=$1 t
	shift
	[ "$rc" = "$want" ] || fail "exit $rc, want $want: $(cat "$TMP/err")"
	for t in "$@"; do
		grep -qF -- "$t" "$TMP/err" || fail "'$t' not in: $(cat "$TMP/err")"
	done
	n=$((n + 1))
	echo "ok ($rc): $(tail -n 1 "$TMP/err" | cut -c1-200)"
}
one_line() { [ "$(wc -l <"$TMP/err")" = 1 ] || fail "want one line, got: $(cat "$TMP/err")"; }

# start NAME ARGS...: an ingestd on 127.0.0.1 (port from its port file); sets SERVER
start() {
	local name=$1
	shift
	ing_start "$INGESTD" "$TMP/$name.port" "$TMP/$name.log" --data-dir "$TMP/$name" \
		--pool 1M:4 --workers 1 --log-level info "$@"
	PIDS+=("$ING_PID")
	SERVER=$ING_SERVER
}

step "1. --pool larger than memory: the numbers and the fix, nothing started"
run "$INGESTD" --check-config --data-dir "$TMP/big" --pool 64M:100000
expect 2 "--pool '64M:100000' needs 6250.0 GiB" "GiB memory" "give fewer or smaller size classes"
one_line
run "$INGESTD" --listen 127.0.0.1:0 --data-dir "$TMP/big" --pool 64M:100000
expect 2 "--pool '64M:100000' needs 6250.0 GiB" "available memory" "fewer or smaller size classes"
[ -e "$TMP/big" ] && fail "a refused start created its data dir"
grep -q "starting EAL\|mmap\|frames class" "$TMP/err" && fail "the refused start got as far as EAL or mmap"

step "2. a data dir that is a file"
: >"$TMP/afile"
run "$INGESTD" --check-config --data-dir "$TMP/afile"
expect 2 "--data-dir '$TMP/afile' is a file, not a directory" "point --data-dir at a directory"
one_line
printf 'listen = 127.0.0.1:0\ndata-dir = %s/afile/frames\n' "$TMP" >"$TMP/file.conf"
run "$INGESTD" --config "$TMP/file.conf" --check-config
expect 2 "$TMP/file.conf: --data-dir '$TMP/afile/frames' cannot be created: '$TMP/afile' is a file"
run "$INGESTD" --check-config --data-dir "$TMP/fresh/dir" --pool 1M:2
[ "$rc" = 0 ] && grep -q "configuration OK" "$TMP/out" || fail "a data dir to be created: exit $rc $(cat "$TMP/err")"
[ -e "$TMP/fresh" ] && fail "--check-config created the data dir"
n=$((n + 1))
run "$INGESTD" --listen 127.0.0.1:0 --data-dir "$TMP/afile" --pool 1M:2
expect 1 "ERR" "--data-dir '$TMP/afile' is a file, not a directory: point --data-dir at a directory"
[ "$(grep -c ERR "$TMP/err")" = 1 ] || fail "a data dir that is a file: want one ERR line: $(cat "$TMP/err")"
grep -q "starting EAL" "$TMP/err" && fail "a data dir that is a file: the start got as far as EAL"

step "3. a port in use: the last line, before EAL and the pool"
start a
PORT_A=${SERVER#*:}
run "$INGESTD" --listen "127.0.0.1:$PORT_A" --data-dir "$TMP/b" --pool 1M:2 --log-level info
expect 1 "cannot listen on --listen 127.0.0.1:$PORT_A: Address already in use" \
	"another process listens there" "choose another address"
tail -n 1 "$TMP/err" | grep -q "Address already in use" || fail "the port is not the last line: $(tail -n 2 "$TMP/err")"
grep -q "starting EAL\|frames class\|serving gRPC" "$TMP/err" && fail "EAL or the pool started before the port was checked"
run "$INGESTD" --listen 127.0.0.1:0 --metrics-listen "127.0.0.1:$PORT_A" --data-dir "$TMP/b" --pool 1M:2
expect 1 "cannot listen on --metrics-listen 127.0.0.1:$PORT_A: Address already in use"

step "4. TLS both ways, the certificate's name, the token"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$TMP/key.pem" \
	-out "$TMP/cert.pem" -days 2 -subj /CN=ingest-test -addext subjectAltName=DNS:ingest-test \
	>/dev/null 2>&1 || fail "openssl req"
printf '%s\n' "a-shared-secret-for-the-test-0123" >"$TMP/token"
chmod 600 "$TMP/token"
start tls --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem" --auth-token-file "$TMP/token"
TLS=$SERVER
run "$SEND" --server "$TLS" --count 1 --size 4K --quiet --auth-token-file "$TMP/token"
expect 1 "the node speaks TLS and closed this cleartext connection" "ingest-send --tls-ca PEM"
one_line
run "$SEND" --server "127.0.0.1:$PORT_A" --count 1 --size 4K --quiet --tls-ca "$TMP/cert.pem"
expect 1 "the node speaks cleartext HTTP/2, not TLS" "no --tls-ca" "--tls-cert and --tls-key"
run "$SEND" --server "$TLS" --count 1 --size 4K --quiet --tls-ca "$TMP/cert.pem" --auth-token-file "$TMP/token"
expect 1 "the node's certificate does not name 127.0.0.1" "--tls-server-name"
run "$SEND" --server "$TLS" --count 1 --size 4K --quiet --tls-ca "$TMP/cert.pem" --tls-server-name ingest-test
expect 1 "UNAUTHENTICATED" "no auth token given" "ingest-send --auth-token-file"
run "$SEND" --server "$TLS" --count 1 --size 4K --quiet --tls-ca "$TMP/cert.pem" \
	--tls-server-name ingest-test --auth-token-file "$TMP/token"
[ "$rc" = 0 ] || fail "the right TLS options: exit $rc: $(cat "$TMP/err")"

step "5. no node there: once, with the hint"
run "$SEND" --server 127.0.0.1:1 --count 1 --quiet
expect 1 "connect 127.0.0.1:1: Connection refused" "is ingestd running"
[ "$(grep -c "Connection refused" "$TMP/err")" = 1 ] || fail "said more than once: $(cat "$TMP/err")"
one_line

step "6. a conflict is named; the stored frame stays"
SERVER=127.0.0.1:$PORT_A
run "$SEND" --server "$SERVER" --count 1 --size 4K --wafer W1 --quiet
[ "$rc" = 0 ] || fail "first send to a: exit $rc $(cat "$TMP/err")"
run "$SEND" --server "$SERVER" --count 1 --size 4K --wafer W1 --seed 2 --quiet
expect 1 "frame frame-1 of wafer W1 is already stored with another CRC-32C" "send other bytes under another id"
grep -q "code 4" "$TMP/err" && fail "the conflict is still a bare code"
run "$VERIFY" --data-dir "$TMP/a" --count 1 --size 4K --wafer W1 --quiet
[ "$rc" = 0 ] || fail "the first frame is not intact after the conflict: $(cat "$TMP/err")"

step "7. a frame over the node's maximum: the file named, nothing sent"
head -c 2000000 /dev/urandom >"$TMP/big.bin"
run "$SEND" --server "$SERVER" --wafer W2 "$TMP/big.bin"
expect 1 "$TMP/big.bin has 2000000 bytes, more than the node's largest frame, 1048576 bytes" "nothing sent"
run "$SEND" --server "$SERVER" --wafer W2 --count 3 --sizes 512K,2M --seed 3 --quiet
expect 1 "more than the node's largest frame" "synthetic frame frame-"
[ -e "$TMP/a/frames/W2" ] && fail "frames of a refused send were stored"

step "8. ingest-bench: a dead node writes nothing; a --sizes range sweeps mixed sizes"
run "$BENCH" --server 127.0.0.1:1 --out "$TMP/bench-dead" --capacity-fps 10 --loads 10 --duration 1s
expect 1 "Connection refused" "nothing measured, no report written"
[ -e "$TMP/bench-dead" ] && fail "ingest-bench wrote $TMP/bench-dead for a dead node"
run "$BENCH" --server "$SERVER" --out "$TMP/bench" --capacity-fps 20 --loads 50 --duration 1s \
	--warmup 0 --no-plots --sizes 64K-256K
[ "$rc" = 0 ] || fail "ingest-bench --sizes 64K-256K: exit $rc: $(tail -3 "$TMP/err")"
python3 - "$TMP/bench/results.json" <<'PY' || fail "results.json of a range"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["params"]["sizes"] == [{"min": 65536, "max": 262144}], d["params"]["sizes"]
p = d["points"][0]
assert p["ok"] > 0 and p["failed"] == 0, p
assert p["size"] == {"min": 65536, "max": 262144}, p["size"]
PY
n=$((n + 1))

step "9. ingest-doctor --config reads ingestd's file"
printf 'data-dir = %s/doc\npool = 4M:16,16M:8,64M:4\nhugepages = off\n' "$TMP" >"$TMP/good.conf"
run "$DOCTOR" --config "$TMP/good.conf"
grep -q "pool 448 MiB on 4 KiB pages" "$TMP/out" || fail "the doctor did not take the file's pool: $(head -1 "$TMP/out")"
grep -q "PASS  memory.pool" "$TMP/out" || fail "no memory.pool PASS: $(grep memory.pool "$TMP/out")"
n=$((n + 1))
printf 'data-dir = %s/doc\npool = 64M:100000\n' "$TMP" >"$TMP/huge.conf"
run "$DOCTOR" --config "$TMP/huge.conf"
[ "$rc" = 1 ] && grep -q "FAIL  memory.pool.*pool 6250 GiB > .* available" "$TMP/out" ||
	fail "the doctor passed a pool larger than memory: exit $rc: $(grep memory.pool "$TMP/out")"
n=$((n + 1))
printf 'data-dir = %s/doc\npol = 4M:4\n' "$TMP" >"$TMP/typo.conf"
run "$DOCTOR" --config "$TMP/typo.conf"
expect 2 "ingest-doctor: $TMP/typo.conf:2: unknown key 'pol' (did you mean pool?)"
one_line

step "10. ingest-verify where there is no data dir"
mkdir -p "$TMP/empty"
run "$VERIFY" --data-dir "$TMP/empty" --count 1
expect 1 "catalog.db: No such file or directory" "is --data-dir ingestd's data dir?"

step "11. --check-config: TLS key, max-frame, --tier's scheme"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$TMP/key2.pem" \
	-out "$TMP/cert2.pem" -days 2 -subj /CN=other >/dev/null 2>&1 || fail "openssl req (second key)"
run "$INGESTD" --check-config --data-dir "$TMP/c11" --pool 1M:2 --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key2.pem"
expect 2 "--tls-key '$TMP/key2.pem' does not match --tls-cert '$TMP/cert.pem'" "give the key the certificate was issued for"
one_line
run "$INGESTD" --listen 127.0.0.1:0 --data-dir "$TMP/c11" --pool 1M:2 --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key2.pem"
expect 2 "--tls-key '$TMP/key2.pem' does not match --tls-cert '$TMP/cert.pem'"
grep -q "starting EAL" "$TMP/err" && fail "a mismatched key: the start got as far as EAL"
run "$INGESTD" --check-config --data-dir "$TMP/c11" --pool 1M:4,4M:2 --max-frame 16M
expect 2 "--max-frame 16M is above the largest pool slot (4M, --pool '1M:4,4M:2')" \
	"lower --max-frame or add a size class of at least 16M to --pool"
one_line
printf 'access_key = AK\nsecret_key = SK\n' >"$TMP/s3.cred"
chmod 600 "$TMP/s3.cred"
run "$INGESTD" --check-config --data-dir "$TMP/c11" --pool 1M:2 --tier http://rgw.example:7480/frames \
	--tier-credentials "$TMP/s3.cred"
expect 2 "--tier 'http://rgw.example:7480/frames': the scheme of --tier is s3:// (plain HTTP to the store) or https:// (TLS)" \
	"--tier s3://rgw.example:7480/frames"
one_line
run "$INGESTD" --check-config --data-dir "$TMP/c11" --pool 1M:2 --tier s3://rgw.example:7480/frames \
	--tier-credentials "$TMP/s3.cred" --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem" --max-frame 1M
[ "$rc" = 0 ] || fail "the corrected settings do not pass: exit $rc: $(cat "$TMP/err")"
n=$((n + 1))

echo "PASS: $n mistakes, each said with its fix"
