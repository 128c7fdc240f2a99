#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# mkman.sh PROGRAM INCLUDE OUT VERSION - the man page of one program, at build time:
# help2man over PROGRAM --help, with the sections --help does not carry (CONFIGURATION,
# SIGNALS, FILES, SEE ALSO) from the include file INCLUDE. The NAME line is the help's own
# summary (its second line), so the page cannot contradict the program; the help's
# "Exit status:" block becomes the EXIT STATUS section. Fails when a section is missing.
set -eu
bin=$1 inc=$2 out=$3 ver=$4
tmp=$out.tmp
summary=$("$bin" --help | sed -n 2p)
[ -n "$summary" ] || { echo "mkman: $bin --help has no summary line" >&2; exit 1; }
help2man --no-info --no-discard-stderr --version-string="$ver" --name="$summary" --section=1 \
	--source=h3000-ingest --include="$inc" --output="$tmp" "$bin"
sed -i 's/^\.SS "Exit status:"$/.SH "EXIT STATUS"/' "$tmp"
for s in NAME SYNOPSIS DESCRIPTION OPTIONS '"EXIT STATUS"' CONFIGURATION SIGNALS FILES '"SEE ALSO"'; do
	grep -q "^\.SH $s\$" "$tmp" || { echo "mkman: $(basename "$bin").1 has no $s section ($inc)" >&2; exit 1; }
done
mv "$tmp" "$out"
