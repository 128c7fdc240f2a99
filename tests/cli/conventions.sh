#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# conventions.sh BUILD_DIR - every program behaves the same way on its command line
# (common/cli.h), as a new engineer tries them:
#  1. --version: "PROG (h3000 ingest) VERSION", exit 0;
#  2. --help: usage, options, the exit status codes 0, 1 and 2 with their meaning, exit 0;
#  3. an unknown flag, a bad value, a missing value, an unexpected argument: exactly one line
#     on stderr naming the flag and "try 'PROG --help'", no help text, exit 2 (and a typo
#     gets "did you mean");
#  4. durations with units everywhere, the old "-ms" spellings still meaning milliseconds;
#     --sizes one grammar (sizes and ranges) in ingest-send, ingest-verify, ingest-bench;
#  5. ingest-doctor's help names only ingestd flags that exist;
#  6. the man pages: NAME is the help's summary, and CONFIGURATION, SIGNALS, EXIT STATUS
#     and FILES sections are there;
#  7. --help in sections (ingestd, ingest-get, ingest-verify, ingest-bench, ingest-stat,
#     ingest-catalog): each option under a titled section, the man page's OPTIONS has them
#     as subsections;
#  8. bash completion made from each option table, as a user gets it: the script is valid
#     bash, offers every flag --help lists, and, sourced into bash, completes a flag's
#     prefix, a CHOICE flag's values, a directory for --data-dir, a file for --config=,
#     ingest-catalog's commands.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

BUILD=$(cd "${1:?usage: conventions.sh BUILD_DIR}" && pwd)
A=$BUILD/apps
PROGS="ingestd ingest-send ingest-verify ingest-get ingest-topo ingest-doctor ingest-bench ingest-stat ingest-catalog"
for p in $PROGS; do ing_need_built "$A/$p"; done
TMP=$(mktemp -d /tmp/cli-conventions.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
n=0
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { n=$((n + 1)); }

# run PROG ARGS...: stdout in $TMP/out, stderr in $TMP/err, exit status in $rc
run() {
	local p=$1
	shift
	rc=0
	timeout 30 "$A/$p" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
}

# usage_error TEXT PROG ARGS...: exit 2, one line on stderr with TEXT and the --help hint
usage_error() {
	local text=$1 p=$2
	shift 2
	run "$p" "$@"
	[ "$rc" = 2 ] || fail "$p $*: exit $rc, want 2: $(head -3 "$TMP/err")"
	[ "$(wc -l <"$TMP/err")" = 1 ] || fail "$p $*: want one line on stderr, got: $(cat "$TMP/err")"
	[ ! -s "$TMP/out" ] || fail "$p $*: printed on stdout: $(head -3 "$TMP/out")"
	grep -qF -- "$text" "$TMP/err" || fail "$p $*: '$text' not in: $(cat "$TMP/err")"
	grep -qF -- "try '$p --help'" "$TMP/err" || fail "$p $*: no --help hint: $(cat "$TMP/err")"
	grep -q "^Usage:" "$TMP/err" && fail "$p $*: printed the help on a usage error"
	ok
}

step "1-3. --version, --help and usage errors, the same in every program"
VER=$(sed -n 's/^#define ING_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' \
	"$(dirname "$0")/../../include/ingest/ingest.h" | paste -sd.)
for p in $PROGS; do
	run "$p" --version
	[ "$rc" = 0 ] && grep -qx "$p (h3000 ingest) $VER" "$TMP/out" || fail "$p --version: exit $rc: $(cat "$TMP/out" "$TMP/err")"
	run "$p" --help
	[ "$rc" = 0 ] || fail "$p --help: exit $rc"
	grep -q "^Usage: $p " "$TMP/out" || fail "$p --help: no usage line"
	grep -q "^Exit status:" "$TMP/out" || fail "$p --help: no exit status"
	for code in 0 1 2; do
		grep -q "^  $code  [a-z]" "$TMP/out" || fail "$p --help: exit status $code is not explained"
	done
	grep -q -- "--version" "$TMP/out" || fail "$p --help: --version not listed"
	usage_error "unknown option '--no-such-flag'" "$p" --no-such-flag
	ok
done
usage_error "--workers: '0' is not a number in 1..64" ingestd --workers 0
usage_error "did you mean --frame-timeout?" ingestd --frame-timout 30s
usage_error "--listen needs a value" ingestd --listen
usage_error "unexpected argument 'extra'" ingestd extra
usage_error "--credits: 'many' is not a number" ingest-send --credits many --count 1
usage_error "nothing to send: give --count N" ingest-send
usage_error "--transport: 'carrier-pigeon' is not auto, rdma, rdma-read, rdma-write or grpc" \
	ingest-send --transport carrier-pigeon --count 1
usage_error "--json takes no value" ingest-send --json=yes --count 1
usage_error "--server: 'localhost' has no :PORT" ingest-send --server localhost --count 1
usage_error "--servers: 'b' has no :PORT" ingest-send --servers a:50051,b --count 1
usage_error "--server: ':50051' has no host" ingest-bench --server :50051
usage_error "--data-dir DIR is missing" ingest-verify --count 3
usage_error "--seed: 'x' is not a number" ingest-verify --data-dir "$TMP" --count 1 --seed x
usage_error "--pool-node: 'x' is not a cpu or node number" ingest-topo --pool-node x
usage_error "--pool-bytes: '12Q' is not a size" ingest-doctor --pool-bytes 12Q
usage_error "--pool: '4M:0': class '4M:0': the count must be 1..1000000" ingest-doctor --pool 4M:0
usage_error "--loads: 'abc' is not a percent in 0.1..200" ingest-bench --loads 20,abc
usage_error "--duration: '5 minutes' is not a duration" ingest-bench --duration '5 minutes'
echo "ok: $n checks"

step "4. durations with units; old -ms spellings mean milliseconds; one --sizes grammar"
for a in "--frame-timeout 2m" "--frame-timeout 90" "--handshake-timeout 1500ms" \
	 "--handshake-timeout-ms 300" "--grant-ms 250" "--grant-timeout 1.5s" \
	 "--slot-stall-ms 2s" "--session-idle 1h" "--fleet-heartbeat-ms 500"; do
	# shellcheck disable=SC2086
	run ingestd --check-config --data-dir "$TMP/dd" --pool 1M:2 $a
	[ "$rc" = 0 ] || fail "ingestd $a: exit $rc: $(cat "$TMP/err")"
	ok
done
usage_error "--frame-timeout: '500ms' is not a duration in 1s..24h" ingestd --frame-timeout 500ms
usage_error "--handshake-timeout-ms: '5' is not a duration in 10ms..10m (e.g. 500ms, 30s, 2m; a bare number is milliseconds)" \
	ingestd --handshake-timeout-ms 5
usage_error "--frame-timeout: '0.5ms' is not a duration" ingest-send --frame-timeout 0.5ms --count 1
usage_error "--sizes: '16M-1M': sizes are at least 1 byte and a range is MIN-MAX" ingest-send --sizes 16M-1M --count 1
usage_error "--sizes: item 2 is empty" ingest-verify --data-dir "$TMP" --count 1 --sizes 4M,
usage_error "--sizes: '4X' is not a size" ingest-bench --sizes 4M,4X
run ingest-send --help
grep -q -- "--frame-timeout-ms N *--frame-timeout in milliseconds" "$TMP/out" || fail "ingest-send --help: old spelling not listed"
echo "ok: $n checks"

step "5. ingest-doctor's help names only ingestd flags that exist"
run ingestd --help
cp "$TMP/out" "$TMP/ingestd.help"
run ingest-doctor --help
refs=$(grep -o "ingestd's --[a-z-]*" "$TMP/out" | sed "s/ingestd's //" | sort -u)
[ -n "$refs" ] || fail "ingest-doctor --help names no ingestd flag"
for f in $refs; do
	grep -q -- "^  $f[ =[]" "$TMP/ingestd.help" || fail "ingest-doctor --help names $f, which ingestd does not have"
	ok
done
grep -q -- "--config FILE" "$TMP/out" || fail "ingest-doctor --help: no --config"
echo "ok: $n checks ($(echo $refs | wc -w) ingestd flags named by the doctor exist)"

step "6. man pages: NAME from the help, the four sections"
MAN=$BUILD/deploy/man
if [ ! -d "$MAN" ]; then
	echo "NOT RUN: man pages (configured with -DING_MANPAGES=OFF)"
else
	for p in $PROGS; do
		f=$MAN/$p.1.gz
		[ -s "$f" ] || fail "$f missing"
		zcat "$f" >"$TMP/man"
		for s in NAME SYNOPSIS DESCRIPTION OPTIONS '"EXIT STATUS"' CONFIGURATION SIGNALS FILES; do
			grep -q "^\.SH $s\$" "$TMP/man" || fail "$p.1: no $s section"
		done
		summary=$("$A/$p" --help | sed -n 2p)
		name=$(sed -n '/^\.SH NAME/{n;p}' "$TMP/man" | sed 's/\\-/-/g')
		[ "$name" = "$p - $summary" ] || fail "$p.1 NAME '$name' is not the help's '$summary'"
		grep -q "RDMA later" "$TMP/man" && fail "$p.1 still says RDMA later"
		ok
	done
fi

step "7. --help in sections"
for p in ingestd ingest-get ingest-verify ingest-bench ingest-stat ingest-catalog; do
	"$A/$p" --help >"$TMP/help"
	# between "Options:" and the first section after the options, every line is a section
	# title, an option, an option's continuation or blank
	secs=$(sed -n '/^Options:$/,/^Help:$/p' "$TMP/help" | grep -c '^[A-Z][A-Za-z ()-]*:$')
	[ "$secs" -ge 4 ] || fail "$p --help: only $secs section titles under Options"
	sed -n '/^Options:$/,/^Help:$/p' "$TMP/help" | sed -n '2p' | grep -q '^[A-Z].*:$' ||
		fail "$p --help: the first option has no section title"
	if [ -d "$BUILD/deploy/man" ]; then
		zcat "$BUILD/deploy/man/$p.1.gz" | sed -n '/^\.SH OPTIONS/,/^\.SH /p' | grep -c '^\.SS ' >"$TMP/ss"
		[ "$(cat "$TMP/ss")" -ge 3 ] || fail "$p.1: OPTIONS has $(cat "$TMP/ss") subsections"
	fi
	ok
done
echo "ok: $n checks"

step "8. bash completion from the option tables"
# complete PROG WORD...: COMPREPLY (one a line) for the command line PROG WORD... (the last
# word is the one being completed), as bash calls the program's completion function
complete_words() {
	local p=$1
	shift
	bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); fn=$(complete -p "$1" | sed "s/.* -F \([^ ]*\) .*/\1/"); "$fn"; printf "%s\n" "${COMPREPLY[@]}"' \
		_ "$TMP/$p.bash" "$p" "$@"
}
for p in $PROGS; do
	"$A/$p" --completion bash >"$TMP/$p.bash" || fail "$p --completion bash: exit $?"
	bash -n "$TMP/$p.bash" || fail "$p's completion is not valid bash"
	grep -q "^complete .* $p\$" "$TMP/$p.bash" || fail "$p's completion does not complete $p"
	offered=$(complete_words "$p" --)
	# the flags of --help (not its old spellings, which work but are not offered)
	for f in $("$A/$p" --help | sed '/^Old spellings/,$d' | sed -n 's/^  \(-h, \)\?\(--[a-z][a-z-]*\).*/\2/p' | sort -u); do
		grep -qx -- "$f=\?" <<<"$offered" || fail "$p: --help lists $f, the completion does not offer it"
	done
	ok
done
[ "$(complete_words ingest-stat --js)" = --json ] || fail "ingest-stat --js<TAB>: '$(complete_words ingest-stat --js)'"
[ "$(complete_words ingestd --hugepages '' | paste -sd' ')" = "auto on off" ] ||
	fail "ingestd --hugepages <TAB>: '$(complete_words ingestd --hugepages '')'"
[ "$(complete_words ingest-get --source = '' | paste -sd' ')" = "any local store" ] ||
	fail "ingest-get --source=<TAB>: '$(complete_words ingest-get --source = '')'"
[ "$(complete_words ingest-catalog '' | paste -sd' ')" = "check rebuild prune" ] ||
	fail "ingest-catalog <TAB>: '$(complete_words ingest-catalog '')'"
[ -z "$(complete_words ingest-catalog prune --data-dir /x '')" ] ||
	fail "ingest-catalog prune --data-dir /x <TAB> offers commands again"
mkdir -p "$TMP/dd/sub" && touch "$TMP/dd/file.conf"
[ "$(complete_words ingest-catalog --data-dir "$TMP/dd/")" = "$TMP/dd/sub" ] ||
	fail "ingest-catalog --data-dir DIR<TAB>: '$(complete_words ingest-catalog --data-dir "$TMP/dd/")'"
complete_words ingest-stat --config = "$TMP/dd/fi" | grep -qx "$TMP/dd/file.conf" ||
	fail "ingest-stat --config=FILE<TAB>: '$(complete_words ingest-stat --config = "$TMP/dd/fi")'"
ok
echo "ok: $n checks (every --help flag offered by every program's completion; values, dirs, files, commands)"
echo "PASS: $n checks"
