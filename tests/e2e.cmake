# SPDX-License-Identifier: Apache-2.0
# End-to-end tests of the producer path (gRPC fallback): ingestd + ingest-send +
# ingest-verify on loopback, label "func". (The producer unit tests link libingest's static
# archive, tests/CMakeLists.txt; test_producer_flow defines the ing_grpc_* client itself,
# a fake.)
add_test(NAME e2e.fallback
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/e2e_fallback.sh ${PROJECT_BINARY_DIR})
set_tests_properties(e2e.fallback PROPERTIES LABELS func TIMEOUT 300)
add_test(NAME e2e.bench_sweep
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/bench_sweep.sh ${PROJECT_BINARY_DIR})
set_tests_properties(e2e.bench_sweep PROPERTIES LABELS func TIMEOUT 300)
add_test(NAME e2e.verify_catalog
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/verify_catalog.sh ${PROJECT_BINARY_DIR})
set_tests_properties(e2e.verify_catalog PROPERTIES LABELS func TIMEOUT 300)
# A single-server producer (ingest-send --server) through a restart of its node, SIGTERM
# and kill -9 mid-run, and through a lost connection to a node that lives on and still holds
# frames in flight (inflight: the re-send of such a frame waits until that earlier send has
# ended, then DURABLE as its duplicate): reconnect, re-send, 300/300 DURABLE, exit 0;
# ingest-verify and the catalog: every frame stored once (tests/e2e/reconnect.sh). Uses the fleet tests' fsync
# gate and helpers (tests/fleet/fleet_lib.sh) for the moment of the stop. Release tree only,
# as the fleet tests (the gate is an LD_PRELOAD library, which ASan's runtime refuses to
# follow); the sanitized libingest runs them as FLEET_SEND=build-asan/apps/ingest-send bash
# tests/e2e/reconnect.sh build kill9.
if(NOT ING_SANITIZE AND NOT ING_SANITIZE_THREAD)
  foreach(_m term kill9 inflight)
    add_test(NAME e2e.reconnect_${_m}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/reconnect.sh ${PROJECT_BINARY_DIR} ${_m})
    set_tests_properties(e2e.reconnect_${_m} PROPERTIES LABELS "func;e2e;release" TIMEOUT 300)
  endforeach()
endif()
