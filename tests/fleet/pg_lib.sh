# SPDX-License-Identifier: Apache-2.0
# tests/fleet/pg_lib.sh - a temporary PostgreSQL cluster for the fleet tests: initdb in a
# temp dir, a random free port on 127.0.0.1, its unix socket inside the temp dir, trust
# authentication on loopback only. Bounded: every pg_ctl waits at most PG_WAIT seconds.
#
#   . tests/fleet/pg_lib.sh
#   trap 'pg_cleanup' EXIT          # or call pg_cleanup from your own EXIT trap
#   pg_start                        # sets PG_PORT, PG_DIR, PG_CONNINFO (database "fleet")
#   pg_sql "SELECT count(*) FROM fleet_frames"   # one value a line, '|' between columns
#   pg_stop / pg_start_again        # stop (fast) and start the same cluster again
#
# As root, initdb and postgres refuse to run: they run as the user "postgres" (Debian's
# package creates it), in a dir that user owns. Not root: as the calling user. Needs the
# Debian packages postgresql (server binaries) and postgresql-client (psql); without them
# pg_start fails saying so. Callers define fail() (print and exit non-zero).

PG_WAIT=${PG_WAIT:-30}
PG_DIR=
PG_PORT=
PG_CONNINFO=
PG_BIN=

pg_find_bin() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r) "$(pg_config --bindir 2>/dev/null)"; do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
			PG_BIN=$d
			return 0
		fi
	done
	return 1
}

# pg_as CMD...: run CMD as the cluster's owner
pg_as() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

pg_free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# pg_start: initdb + start a new cluster; database "fleet" created.
pg_start() {
	pg_find_bin || fail "PostgreSQL server binaries not found (apt-get install postgresql; deploy/install-deps.sh)"
	command -v psql >/dev/null || fail "psql not found (apt-get install postgresql-client)"
	if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
		fail "running as root, and there is no user 'postgres' to run the test cluster as"
	fi
	PG_DIR=$(mktemp -d /tmp/h3000-pg.XXXXXX) || fail "mktemp failed"
	chmod 755 "$PG_DIR"
	[ "$(id -u)" = 0 ] && chown postgres: "$PG_DIR"
	pg_as "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres -A trust --no-sync -E UTF8 \
		--locale=C >"$PG_DIR/initdb.log" 2>&1 ||
		fail "initdb failed: $(tail -5 "$PG_DIR/initdb.log")"
	mkdir -p "$PG_DIR/sock"
	[ "$(id -u)" = 0 ] && chown postgres: "$PG_DIR/sock"
	{
		echo "listen_addresses = '127.0.0.1'"
		echo "unix_socket_directories = '$PG_DIR/sock'"
		echo "max_connections = 50"
		echo "shared_buffers = 32MB"
		echo "log_min_messages = warning"
	} >>"$PG_DIR/data/postgresql.conf"
	printf 'local all all trust\nhost all all 127.0.0.1/32 trust\n' >"$PG_DIR/data/pg_hba.conf"
	[ "$(id -u)" = 0 ] && chown postgres: "$PG_DIR/data/postgresql.conf" "$PG_DIR/data/pg_hba.conf"
	local i
	for i in 1 2 3; do   # a port taken between the probe and the bind: try another
		PG_PORT=$(pg_free_port)
		if pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -o "-p $PG_PORT" -l "$PG_DIR/server.log" \
			-w -t "$PG_WAIT" start >/dev/null 2>&1; then
			break
		fi
		PG_PORT=
	done
	[ -n "$PG_PORT" ] || fail "PostgreSQL did not start: $(tail -5 "$PG_DIR/server.log" 2>/dev/null)"
	PG_CONNINFO="host=127.0.0.1 port=$PG_PORT user=postgres dbname=fleet"
	psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -Atq -c "CREATE DATABASE fleet" ||
		fail "CREATE DATABASE fleet failed"
}

# pg_stop: stop the cluster (fast: open connections are closed), data kept
pg_stop() {
	[ -n "$PG_DIR" ] && [ -d "$PG_DIR/data" ] || return 0
	pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w -t "$PG_WAIT" stop >/dev/null 2>&1
}

# pg_start_again: start the stopped cluster on the same port
pg_start_again() {
	pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -o "-p $PG_PORT" -l "$PG_DIR/server.log" -w \
		-t "$PG_WAIT" start >/dev/null 2>&1 ||
		fail "PostgreSQL did not start again: $(tail -5 "$PG_DIR/server.log")"
}

# pg_sql SQL: run SQL in database fleet; unaligned rows, '|' between columns
pg_sql() {
	psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d fleet -Atq -v ON_ERROR_STOP=1 -c "$1"
}

# pg_cleanup: stop (immediate) and remove the cluster; safe to call twice
pg_cleanup() {
	if [ -n "$PG_DIR" ] && [ -d "$PG_DIR" ]; then
		[ -f "$PG_DIR/data/postmaster.pid" ] &&
			pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w -t "$PG_WAIT" stop >/dev/null 2>&1
		rm -rf "$PG_DIR"
	fi
	PG_DIR=
}
