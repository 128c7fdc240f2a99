#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# layout_lines.sh [TREE]: lines of C (.c, .h) per folder of the layout in TREE's git tree
# (default: this checkout's HEAD), and each folder's share of the product's C (everything
# but tests/). Folders: control/'s and dataplane/'s rooms one level down (control/service's
# xport/, rpc/, obs/ apart; files directly in the folder under its own name), every other
# top-level folder whole; control/ and dataplane/ also whole. Not a test: it prints (issue #28's
# figure; docs/LAYOUT.md).
set -euo pipefail
TREE=${1:-.}
cd "$TREE"
git ls-files -z -- '*.c' '*.h' | xargs -0 wc -l | awk '
	$2 == "total" { next }
	{
		n = split($2, p, "/")
		if ((p[1] == "control" || p[1] == "dataplane") && n > 2) {
			d = p[1] "/" p[2]
			if (p[2] == "service" && n > 3) {
				d = d "/" p[3]
				top["control/service"] += $1
			}
			top[p[1]] += $1
		} else if (n > 1) {
			d = p[1]
		} else {
			d = "."
		}
		lines[d] += $1
		if (p[1] != "tests")
			prod += $1
		all += $1
	}
	END {
		for (d in lines)
			if (d == "tests")
				printf "%-28s %7d  (not in the share)\n", d, lines[d]
			else
				printf "%-28s %7d  %5.1f%%\n", d, lines[d], 100 * lines[d] / prod
		for (t in top)
			printf "%-28s %7d  %5.1f%%  (the folder whole)\n", t "/ (all)", top[t] + lines[t],
			       100 * (top[t] + lines[t]) / prod
		printf "%-28s %7d  (product: all but tests/: %d)\n", "all C", all, prod
	}' | sort
