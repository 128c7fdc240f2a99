# SPDX-License-Identifier: Apache-2.0
# RDMA tests on real Soft-RoCE: ONE ctest (label "rdma") that boots the qemu guest of
# deploy/rxe-vm once and runs tests/rxe/run_all.sh inside it (every tests/rxe/*_in_guest.sh).
# No silent skip: if the guest cannot boot, the harness exits 125 with the console tail and
# the test fails. Logs of each guest test land in <build>/rxe-results/<test>/log.
set(_rxe_harness ${PROJECT_SOURCE_DIR}/deploy/rxe-vm/run-in-rxe-vm.sh)
set(_rxe_results ${CMAKE_BINARY_DIR}/rxe-results)
file(MAKE_DIRECTORY ${_rxe_results})

# Guest-run helper programs (real verbs, no fakes). Built without -march=native: the TCG
# guest CPU lacks some host extensions.
add_executable(rdma_verbs_check ${CMAKE_CURRENT_LIST_DIR}/rxe/verbs_check.c)
target_link_libraries(rdma_verbs_check PRIVATE ing_rdma ing_net_server ing_dataplane ing_common PkgConfig::IBVERBS
                      PkgConfig::RDMACM)

add_test(NAME rdma.rxe
         COMMAND ${CMAKE_COMMAND} -E env
                 RXE_VM_RW=${_rxe_results}
                 ING_SRC_DIR=${PROJECT_SOURCE_DIR}
                 ING_BUILD_DIR=${CMAKE_BINARY_DIR}
                 ING_RXE_RESULTS=${_rxe_results}
                 ${_rxe_harness} ${PROJECT_SOURCE_DIR}/tests/rxe/run_all.sh)
set_tests_properties(rdma.rxe PROPERTIES LABELS rdma TIMEOUT 900 RUN_SERIAL TRUE)
# A second boot with 4 vCPUs (tests/rxe/smp4/*_in_guest.sh): a node with three dataplane
# lcores and six producers at once; a fleet of three nodes over RDMA with failovers.
add_test(NAME rdma.rxe_smp4
         COMMAND ${CMAKE_COMMAND} -E env
                 RXE_VM_SMP=4
                 RXE_VM_MEM=3072
                 RXE_VM_RW=${_rxe_results}
                 ING_SRC_DIR=${PROJECT_SOURCE_DIR}
                 ING_BUILD_DIR=${CMAKE_BINARY_DIR}
                 ING_RXE_RESULTS=${_rxe_results}
                 ${_rxe_harness} ${PROJECT_SOURCE_DIR}/tests/rxe/run_all.sh smp4)
set_tests_properties(rdma.rxe_smp4 PROPERTIES LABELS rdma TIMEOUT 1200 RUN_SERIAL TRUE)
# tests/rxe/dotnet_in_guest.sh runs the C# programs dotnet.build made on the host
if(TEST dotnet.build)
  set_property(TEST rdma.rxe APPEND PROPERTY FIXTURES_REQUIRED dotnet_built)
endif()
add_executable(rxe_stats ${CMAKE_CURRENT_LIST_DIR}/rxe/rxe_stats.c)
target_link_libraries(rxe_stats PRIVATE ingest_static)
# libingest's -EFAULT range check on RDMA against a real ingestd (tests/rxe/ctl_in_guest.sh)
add_executable(rdma_efault_check ${CMAKE_CURRENT_LIST_DIR}/rxe/efault_check.c)
target_link_libraries(rdma_efault_check PRIVATE ingest_static)
# ingest-send built against the test build of libingest with its fault-injection hooks
# (ING_TEST_HOOKS: producer/rdma_producer.c), for tests/rxe/rdma_in_guest.sh only; the
# shipped ingest-send and libingest.so.1 do not contain them.
add_executable(ingest_send_testhooks ${PROJECT_SOURCE_DIR}/apps/ingest-send.c)
target_link_libraries(ingest_send_testhooks PRIVATE ingest_testhooks)
