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
