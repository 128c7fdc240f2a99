# SPDX-License-Identifier: Apache-2.0
# Fleet of ingest nodes, node side (label "fleet"): each test starts its own temporary
# PostgreSQL cluster (tests/fleet/pg_lib.sh: initdb + pg_ctl in a temp dir, random port,
# loopback only) and its ingestd nodes on 127.0.0.1, and stops them all on exit.
#  - fleet.export: frames on two nodes exported to PostgreSQL (lag 0), ingest-verify --fleet
#    clean; the same frames on both nodes are duplicates (allowed, counted); re-export after
#    a restart is idempotent; Members: both nodes, DRAINING (SIGUSR2), DOWN (kill -9);
#    ingest-verify --fleet reports a corrupt copy and a missing frame.
#  - fleet.pg_outage: PostgreSQL stopped mid-stream: every frame still ACKed DURABLE, the
#    export lag grows (Stats), PostgreSQL back: lag drains to 0, ingest-verify --fleet clean.
set(_fleet ${CMAKE_CURRENT_LIST_DIR}/fleet)
add_test(NAME fleet.export COMMAND bash ${_fleet}/export.sh ${PROJECT_BINARY_DIR})
add_test(NAME fleet.pg_outage COMMAND bash ${_fleet}/pg_outage.sh ${PROJECT_BINARY_DIR})
set_tests_properties(fleet.export fleet.pg_outage PROPERTIES LABELS fleet TIMEOUT 180)
