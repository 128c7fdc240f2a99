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
# Producer side (docs/FLEET.md): HRW placement agreed by C and Python, and three real
# ingestd on loopback with ingest-send --servers (each bounded, started and stopped by the
# test itself).
#  - fleet.hrw_python: the vectors of tests/fleet/hrw_vectors.tsv recomputed with hashlib
#    (the spec, the way any producer computes it); unit.test_producer_hrw checks the C side
#    against the same file.
add_test(NAME fleet.hrw_python
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/fleet/hrw.py
                 --check ${CMAKE_CURRENT_SOURCE_DIR}/fleet/hrw_vectors.tsv)
set_tests_properties(fleet.hrw_python PROPERTIES LABELS "fleet;unit" TIMEOUT 60)
#  - fleet.failover_kill9: kill -9 of one of three nodes mid-stream: every frame DURABLE
#    somewhere, frames re-sent, each node holds what it acked byte for byte, a second send
#    of the same frames is all ok (duplicates, never a conflict).
#  - fleet.failover_sigstop: one node hung (SIGSTOP): failover by missed PING / ack
#    deadline while it is still stopped; after SIGCONT it takes its wafers again.
#  - fleet.join_drain: membership learned from one node (PostgreSQL); a node joins and one
#    drains mid-stream: every frame on its HRW owner for what the producer knew.
# The failover tests kill or stop a node at a moment they control: once it holds frames
# RECEIVED and not DURABLE, which fsync_gate.so (LD_PRELOAD, test build only) makes a state
# that lasts: while the gate file exists the node's fdatasync waits.
add_library(ing_fsync_gate MODULE ${CMAKE_CURRENT_LIST_DIR}/fleet/fsync_gate.c)
set_target_properties(ing_fsync_gate PROPERTIES PREFIX "" OUTPUT_NAME fsync_gate)
target_link_libraries(ing_fsync_gate PRIVATE ${CMAKE_DL_LIBS})
# Release tree only (label release, like the fault suite): up to five real processes each,
# a minute or two on a loaded 2-core machine; under ASan they would take several times that.
# They run beside other tests: the fsync gate, not timing, decides when a node is killed.
# The ASan tree checks the same libingest code through unit.test_producer_hrw, and any
# ingest-send runs these tests: FLEET_SEND=build-asan/apps/ingest-send bash <test> build.
if(NOT ING_SANITIZE AND NOT ING_SANITIZE_THREAD)
  foreach(_t failover_kill9 failover_sigstop join_drain)
    add_test(NAME fleet.${_t}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fleet/${_t}.sh ${PROJECT_BINARY_DIR})
    set_tests_properties(fleet.${_t} PROPERTIES LABELS "fleet;release" TIMEOUT 600)
  endforeach()
endif()
