# SPDX-License-Identifier: Apache-2.0
# Operating ingestd (label func): config file, JSON logs, Prometheus metrics, systemd.
#  - func.ops.config: --config FILE alone, a flag overriding it, unknown key / bad value /
#    malformed line -> one line FILE:LINE and exit 2; deploy/ingestd.conf passes.
#  - func.ops.json_logs: --log-format json: every stderr line parses as a JSON object.
#  - func.ops.prometheus: a real Prometheus (1 s scrapes) over ingestd /metrics during
#    ingest-send: rate() of bytes > 0 and histogram_quantile() finite, via its HTTP API.
#  - func.ops.promtool: `promtool check metrics` clean; the page counts the traffic; HTTP.
#  - func.ops.systemd: systemd-analyze verify of deploy/ingestd.service.in (paths filled in) is clean.
#  - func.ops.sd_notify: READY=1 once serving, WATCHDOG=1 pings, STOPPING=1 on SIGTERM.
#  - func.ops.oncall: failures by code, per-peer series, connections, process_* in /metrics;
#    /healthz, /readyz (503 while DRAINING); ingest-stat's screen, --json, --watch, errors.
#  - func.ops.monitoring: deploy/monitoring: promtool check rules; every metric the alert
#    rules and the Grafana dashboard use is in a live node's /metrics; a real Prometheus
#    evaluates every rule and runs every dashboard query.
#  - func.ops.catalog_recovery: a damaged catalog.db: ingestd's message with the fix,
#    ingest-catalog check and rebuild (ids from escaped names, CRC-32C recomputed, rows
#    salvaged from a readable catalog, a damaged file caught), ingestd again.
#  - func.ops.prune: ingest-catalog prune --older-than [--wafer] [--dry-run] beside a running
#    node; killed mid-way (SIGKILL) and run again: rows and files agree; journals finished.
#  - func.ops.deps_sets: deploy/install-deps.sh's demo set is the build set plus a few tools,
#    none of the test stack; demo-tier adds Ceph; make demo / TIER=1 / install use them.
#  - func.ops.hugepages_none / _reserved: --hugepages auto (the default) without enough free
#    hugepages (one warning with the fix, as ingest-doctor says) and with pages reserved by
#    deploy/'s ingest-hugepages (root; the pool on 2 MiB pages; the host's count restored).
#  - func.ops.reload: SIGHUP with a stream open across it (no reconnect, every frame
#    stored), a new token and certificate for new connections, a key that needs a restart
#    kept and named, a bad file / missing certificate / mismatched key refused with why.
#  - func.ops.print_config: --print-config round trip (defaults, file and flags merged).
#  - func.ops.advertise: a node on 0.0.0.0 advertises its default route's address in
#    Members (ingest-stat), one WARN; --advertise wins, no WARN.
#  - func.ops.quiet_fallback: a host without RDMA: one INFO at start, no WARN per auto
#    session (producer or node); ingest_sessions_by_state tells idle from streaming.
set(_ops ${CMAKE_CURRENT_LIST_DIR}/ops)
add_test(NAME func.ops.config COMMAND bash ${_ops}/config.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
add_test(NAME func.ops.json_logs COMMAND /usr/bin/python3 ${_ops}/json_logs.py ${PROJECT_BINARY_DIR})
add_test(NAME func.ops.prometheus COMMAND /usr/bin/python3 ${_ops}/prometheus.py ${PROJECT_BINARY_DIR})
add_test(NAME func.ops.promtool COMMAND bash ${_ops}/promtool.sh ${PROJECT_BINARY_DIR})
add_test(NAME func.ops.systemd COMMAND bash ${_ops}/systemd.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
add_test(NAME func.ops.sd_notify COMMAND /usr/bin/python3 ${_ops}/sd_notify.py ${PROJECT_BINARY_DIR})
add_test(NAME func.ops.oncall COMMAND /usr/bin/python3 ${_ops}/oncall.py ${PROJECT_BINARY_DIR}
         ${PROJECT_SOURCE_DIR})
add_test(NAME func.ops.monitoring COMMAND /usr/bin/python3 ${_ops}/monitoring.py ${PROJECT_BINARY_DIR}
         ${PROJECT_SOURCE_DIR})
add_test(NAME func.ops.catalog_recovery COMMAND bash ${_ops}/catalog_recovery.sh ${PROJECT_BINARY_DIR})
add_test(NAME func.ops.prune COMMAND bash ${_ops}/prune.sh ${PROJECT_BINARY_DIR})
add_test(NAME func.ops.reload COMMAND bash ${_ops}/reload.sh ${PROJECT_BINARY_DIR})
add_test(NAME func.ops.print_config COMMAND bash ${_ops}/print_config.sh ${PROJECT_BINARY_DIR})
add_test(NAME func.ops.advertise COMMAND bash ${_ops}/advertise.sh ${PROJECT_BINARY_DIR})
add_test(NAME func.ops.quiet_fallback COMMAND bash ${_ops}/quiet_fallback.sh ${PROJECT_BINARY_DIR})
add_test(NAME func.ops.deps_sets COMMAND bash ${_ops}/deps_sets.sh ${PROJECT_SOURCE_DIR})
add_test(NAME func.ops.hugepages_none COMMAND bash ${_ops}/hugepages.sh ${PROJECT_BINARY_DIR} none)
add_test(NAME func.ops.hugepages_reserved COMMAND bash ${_ops}/hugepages.sh ${PROJECT_BINARY_DIR} reserved)
set_tests_properties(func.ops.config func.ops.json_logs func.ops.prometheus func.ops.promtool
                     func.ops.systemd func.ops.sd_notify func.ops.oncall func.ops.monitoring func.ops.catalog_recovery func.ops.prune func.ops.reload func.ops.print_config func.ops.advertise func.ops.quiet_fallback func.ops.deps_sets func.ops.hugepages_none
                     func.ops.hugepages_reserved PROPERTIES LABELS func TIMEOUT 120)
set_tests_properties(func.ops.hugepages_none func.ops.hugepages_reserved PROPERTIES
                     SKIP_RETURN_CODE 77 RESOURCE_LOCK hugepages)
set_tests_properties(func.ops.advertise func.ops.quiet_fallback PROPERTIES SKIP_RETURN_CODE 77)
