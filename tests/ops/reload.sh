#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# reload.sh BUILD_DIR - ingestd reloads its config file on SIGHUP, as an operator does it
# (edit the file, kill -HUP, or systemctl reload):
#  1. a TLS node with a shared secret; a producer streams 40 frames at 8 a second, its
#     reconnects off (a dropped connection would fail it), over the reload;
#  2. the file changes the secret, the certificate and key, the log level, the frame timeout
#     and rdma-port: one WARN says rdma-port needs a restart and was kept, one INFO line
#     names what was applied; the producer's stream goes on: exit 0, no reconnect, all 40
#     frames on disk with their bytes (ingest-verify against the producer's manifest);
#  3. a new connection gets the new certificate (openssl s_client's fingerprint), the old
#     secret is refused, the new one sends; debug lines now appear in the log;
#  4. a file that does not parse, a certificate that is missing, a key that is not the
#     certificate's: each keeps the running configuration (ERR says why), the node still
#     serves with the new secret and certificate;
#  5. SIGTERM: exit 0.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

ing_test_setup ops-reload "${1:-}" ingest-send ingest-verify
command -v openssl >/dev/null || { echo "FAIL: openssl (the command) is needed" >&2; exit 1; }

cert() {   # cert NAME: a self-signed certificate for localhost and its key
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/$1.key" -out "$TMP/$1.pem" -days 2 \
		-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 >/dev/null 2>&1 ||
		fail "openssl req for $1"
}
fingerprint() { openssl x509 -noout -fingerprint -sha256 -in "$1" | cut -d= -f2; }
served_fingerprint() {
	openssl s_client -connect "$SERVER" -servername localhost -alpn h2 </dev/null 2>/dev/null |
		openssl x509 -noout -fingerprint -sha256 | cut -d= -f2
}
token() { head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32 >"$TMP/$1"; chmod 600 "$TMP/$1"; }
# a reload's summary ("reload of" INFO or ERR) is in the log after line $1
reloaded_after() { tail -n +"$(($1 + 1))" "$TMP/ingestd.log" | grep -q "reload of"; }
hup() {   # hup: SIGHUP and wait for its "reload of" line; prints that line
	local before
	before=$(wc -l <"$TMP/ingestd.log")
	kill -HUP "$PID"
	wait_for "the reload's log line" 30 reloaded_after "$before"
	tail -n +"$((before + 1))" "$TMP/ingestd.log" | grep "reload of" | tail -1
}
send() {   # send TOKEN CA OUT [ARGS...]: a short run against the node
	local tok=$1 ca=$2 out=$3
	shift 3
	"$SEND" --server "$SERVER" --tls-ca "$TMP/$ca.pem" --tls-server-name localhost \
		--auth-token-file "$TMP/$tok" --wafer "w-$out" --count 3 --sizes 64K --quiet "$@" >"$TMP/$out" 2>&1
}

cert a
cert b
token tok1
token tok2
write_conf() {   # write_conf TOKEN CERT [MORE LINES]
	{
		printf 'listen = 127.0.0.1:0\nport-file = %s/port\ndata-dir = %s/data\n' "$TMP" "$TMP"
		printf 'pool = 1M:16,4M:4\nworkers = 1\nauth-token-file = %s/%s\n' "$TMP" "$1"
		printf 'tls-cert = %s/%s.pem\ntls-key = %s/%s.key\n' "$TMP" "$2" "$TMP" "$2"
		shift 2
		for l in "$@"; do printf '%s\n' "$l"; done
	} >"$TMP/node.conf"
}

step "1. a TLS node with a shared secret; a producer streams over the reload"
write_conf tok1 a "frame-timeout = 30s" "log-level = info"
"$INGESTD" --config "$TMP/node.conf" >"$TMP/ingestd.log" 2>&1 &
PID=$!
ing_wait_port "$PID" "$TMP/port" "$TMP/ingestd.log"
SERVER=$ING_SERVER
[ "$(served_fingerprint)" = "$(fingerprint "$TMP/a.pem")" ] || fail "the node does not serve certificate a"
"$SEND" --server "$SERVER" --tls-ca "$TMP/a.pem" --tls-server-name localhost --auth-token-file "$TMP/tok1" \
	--count 40 --rate 8 --sizes 64K-1M --reconnect-timeout 0 --manifest "$TMP/m" \
	--durable-manifest "$TMP/dm" --json >"$TMP/send.json" 2>"$TMP/send.err" &
SPID=$!
durable() { [ -s "$TMP/dm" ] && [ "$(wc -l <"$TMP/dm")" -ge "$1" ]; }
wait_for "5 frames DURABLE before the reload" 60 durable 5

step "2. new secret, certificate, log level, frame timeout; rdma-port needs a restart"
write_conf tok2 b "frame-timeout = 1m" "log-level = debug" "rdma-port = 7999"
kill -0 "$SPID" 2>/dev/null || fail "the producer ended before the reload: $(cat "$TMP/send.err")"
line=$(hup) || exit 1
echo "$line"
echo "$line" | grep -q "INFO.*reload of $TMP/node.conf: applied: " || fail "no INFO summary: $line"
for want in "frame-timeout 30s -> 1m" "log-level info -> debug" "auth-token-file $TMP/tok1 -> $TMP/tok2" \
	    "tls-cert $TMP/a.pem -> $TMP/b.pem" "TLS certificate (new connections)" \
	    "needs a restart (kept): rdma-port"; do
	echo "$line" | grep -qF "$want" || fail "the summary lacks '$want': $line"
done
grep -q "WARN.*reload: rdma-port changed (7472 -> 7999): needs a restart; kept 7472" "$TMP/ingestd.log" ||
	fail "no WARN for rdma-port"
[ "$(grep -c "reload: .* changed (" "$TMP/ingestd.log")" = 1 ] || fail "more than one key said to need a restart"
rc=0
wait "$SPID" || rc=$?
SPID=
[ "$rc" = 0 ] || fail "the producer across the reload exited $rc: $(tail -5 "$TMP/send.err")"
[ "$(json "$TMP/send.json" 'ok')" = 40 ] || fail "the producer got $(json "$TMP/send.json" 'ok') DURABLE acks, want 40"
[ "$(json "$TMP/send.json" 'reconnects')" = 0 ] || fail "the producer's connection was dropped by the reload"
"$VERIFY" --data-dir "$TMP/data" --manifest "$TMP/m" >"$TMP/verify.out" 2>&1 ||
	fail "ingest-verify: $(tail -3 "$TMP/verify.out")"
echo "ok: the stream open across the reload stored 40 of 40 frames, no reconnect, bytes verified"

step "3. new connections: certificate b, the new secret only, debug logging"
[ "$(served_fingerprint)" = "$(fingerprint "$TMP/b.pem")" ] || fail "a new connection does not get certificate b"
send tok1 b old.out && fail "the old secret still sends after the reload"
grep -qi "unauthenticated\|auth" "$TMP/old.out" || fail "the old secret's refusal does not say why: $(cat "$TMP/old.out")"
send tok2 b new.out || fail "the new secret and certificate: $(cat "$TMP/new.out")"
grep -q " DEBUG " "$TMP/ingestd.log" || fail "log-level debug not in force: no DEBUG line"
echo "ok: certificate b served, tok1 refused, tok2 sends, DEBUG lines logged"

step "4. bad new configurations keep the running one"
write_conf tok2 b "frame-timeout = 1m" "log-level = debug" "this is not a setting"
line=$(hup) || exit 1
echo "$line"
echo "$line" | grep -q "ERR.*reload of $TMP/node.conf failed: $TMP/node.conf:11: .*; keeping the running configuration" ||
	fail "a file that does not parse: $line"
write_conf tok2 missing "log-level = debug"
line=$(hup) || exit 1
echo "$line"
echo "$line" | grep -q "ERR.*failed: --tls-cert: '$TMP/missing.pem': No such file or directory; keeping the running configuration" ||
	fail "a missing certificate: $line"
{ sed '/^tls-key/d' "$TMP/node.conf"; printf 'tls-key = %s/a.key\n' "$TMP"; } >"$TMP/n2" &&
	sed -i "s|missing.pem|b.pem|" "$TMP/n2" && mv "$TMP/n2" "$TMP/node.conf"
line=$(hup) || exit 1
echo "$line"
echo "$line" | grep -q "ERR.*failed: --tls-key '$TMP/a.key' does not match --tls-cert '$TMP/b.pem'.*keeping the running configuration" ||
	fail "a key that is not the certificate's: $line"
[ "$(served_fingerprint)" = "$(fingerprint "$TMP/b.pem")" ] || fail "the certificate changed after a refused reload"
send tok2 b new2.out || fail "the node after refused reloads: $(cat "$TMP/new2.out")"
echo "ok: each refused with its reason; the node serves as before"

step "5. SIGTERM"
ing_term_pid
echo "PASS: SIGHUP reload"
