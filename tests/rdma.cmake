# SPDX-License-Identifier: Apache-2.0
# RDMA tests on real Soft-RoCE, in the qemu guest of deploy/rxe-vm (Debian's kernel with
# rdma_rxe; label "rdma", release tree). A boot costs TCG minutes, so the guest tests come in
# batches that share boots (tests/rxe/guest.sh -> tests/rxe/run_all.sh BATCH...):
#  - rdma.rxe:        tests/rxe/*_in_guest.sh (batch main)
#  - rdma.rxe_smp4:   tests/rxe/smp4/*_in_guest.sh (batch smp4: a node with three dataplane
#                     lcores and six producers at once; a fleet of three nodes over RDMA
#                     with failovers; needs 4 vCPUs, so its boot has 4 and 3 GiB)
#  - rdma.rails:      tests/rxe/rails_in_guest.sh (batch rails: one node with two rails; needs
#                     two NUMA nodes and two NICs, so its boot has them, 8 vCPUs (4 a node:
#                     smp4's tests keep 4 on the node of their one rail), 3 GiB)
#  - fault.powerloss: tests/fault/powerloss_in_guest.sh short (tests/fault.cmake)
# ING_RXE_BOOTS lists the boots, each its batches joined by '+': rdma.guest is the first boot,
# rdma.guest_2 the second, ... (fixtures rdma_guest, rdma_guest_2, ...). Boots run beside each
# other and beside the host tests (ctest -j); a boot's test fails only when the guest cannot
# boot or a batch reached no verdict (with the console tail), and each batch is one ctest
# that prints its PASS/FAIL lines and fails when one of its tests failed
# (tests/rxe/batch_result.sh). A batch that needs another guest (more vCPUs; NUMA nodes, a
# second rail) says so in run_all.sh's batch_needs and joins a boot that provides it.
# No time budget: run_all.sh stops a guest test only when it made no progress for minutes
# (scaled by the guest's measured speed); TIMEOUT here only catches a hung guest.
# Logs of each guest test land in <build>/rxe-results/<batch>/<test>/log.
set(_rxe_results ${CMAKE_BINARY_DIR}/rxe-results)
file(MAKE_DIRECTORY ${_rxe_results})
# Two boots by default, beside each other: main+smp4+powerloss (4 vCPUs, 3 GiB; it waits
# for dotnet.build, ~60 s, for the guest test dotnet) and rails (8 vCPUs, two NUMA nodes,
# two NICs, from the start). On a fresh clone here, idle, with rails+powerloss in the second
# boot: main 442 + smp4 141 s (rdma.guest 616 s) beside rails 786 + powerloss 108 s
# (rdma.guest_2 945 s, the suite's critical path, 16 min 22 s in all): powerloss moved. History of the split (each a fresh clone on this 2-core
# host, the two boots side by side): one boot for all took 1267 s of a 1408 s release pass
# (main 582 + smp4 296 + powerloss 330 s in a row); main | smp4+rails+powerloss had the second
# boot as the critical path (879 s: 285 + 373 + 172 s); main+powerloss | smp4+rails was 913 |
# 889 s (main 638 + powerloss 231; smp4 390 + rails 445). Then the rails batch gained the rail
# failover steps (a link down and a device removal under one running producer, ~150 s each
# at load 15-25) and the striped 64 MiB frame, so rails alone is the longest batch: it gets
# the light powerloss (one vCPU's worth of work, any shape; it ran in the rails shape before)
# and main shares the 4-vCPU shape with smp4 (main's tests ran there before too). A third
# TCG guest on 2 cores only slows the other two: the cores are saturated the whole pass.
# Where a boot's time goes (the guest's own seconds a test, fresh clone here at load 5-9):
# rdma.guest 913 s = main 638 (ctl 84, doctor 38, dotnet 101, engine 19, push 194, rdma
# 85, reconnect 36, removal 25, service_user 20, smoke 7) + powerloss 231; rdma.guest_2
# 889 s = smp4 390 (fleet 276, lcores 96) + rails 445. The host's two cores run both
# boots and the host tests, so CPU saved anywhere shortens the boots (at load ~22 the
# same tests took 2-3 times as long; their CPU, below, stays). Cut since, in CPU seconds of
# the qemu process (utime+stime sampled at each step line; the previous scripts booted
# beside, same build, same load): push 118 -> 97 (its sustained step, 1 MiB frames: 45 ->
# 22), dotnet 47 -> 33 (one .NET start for both transports), fleet 143 -> 105 (120
# frames a run; step A 69 -> 39); engine, unchanged, 6-10 in each boot.
# The rails shape (8 vCPUs, two nodes, two NICs) against a one-node 4-vCPU guest: smp4's
# lcores alone in that shape and in a one-node 4-vCPU guest, booted side by side (load
# 10-13), took 89 and 76 CPU-s of qemu for boot, test and shutdown (both ~240 s wall). So
# node 1's 4 idle vCPUs and the second NIC cost ~13 CPU-s per 240 s (idle TCG vCPUs halt;
# smp4 keeps 4 busy vCPUs on 2 host cores in either shape): a 4+2 split could save at most
# half of that, ~10 CPU-s over smp4, and rails would lose half of node 1. With smp4 beside
# main now, smp4 runs in the 4-vCPU one-node shape.
set(ING_RXE_BOOTS "main+smp4+powerloss;rails" CACHE STRING
    "guest boots of make test, each its test batches joined by '+' (main, smp4, powerloss, rails)")
# a tree configured with an earlier default keeps it in its cache: move it on (any other
# value is the caller's choice; rdma.rails then fails with "no verdict" unless a boot of
# that value runs batch rails)
if(ING_RXE_BOOTS STREQUAL "main;smp4+powerloss" OR ING_RXE_BOOTS STREQUAL "main;smp4+rails+powerloss" OR
   ING_RXE_BOOTS STREQUAL "main+powerloss;smp4+rails" OR ING_RXE_BOOTS STREQUAL "main+smp4;rails+powerloss")
  set(ING_RXE_BOOTS "main+smp4+powerloss;rails" CACHE STRING
      "guest boots of make test, each its test batches joined by '+' (main, smp4, powerloss, rails)" FORCE)
endif()

# Guest-run helper programs (real verbs, no fakes). Built without -march=native: the TCG
# guest CPU lacks some host extensions.
add_executable(rdma_verbs_check ${CMAKE_CURRENT_LIST_DIR}/rxe/verbs_check.c)
target_link_libraries(rdma_verbs_check PRIVATE ing_rdma ing_net_server ing_dataplane ing_common PkgConfig::IBVERBS
                      PkgConfig::RDMACM)

set(_n 0)
set(_guest_tests)
foreach(_boot IN LISTS ING_RXE_BOOTS)
  math(EXPR _n "${_n} + 1")
  set(_g rdma.guest)
  set(_fx rdma_guest)
  if(_n GREATER 1)
    set(_g rdma.guest_${_n})
    set(_fx rdma_guest_${_n})
  endif()
  string(REPLACE "+" ";" _batches "${_boot}")
  add_test(NAME ${_g} COMMAND ${CMAKE_CURRENT_LIST_DIR}/rxe/guest.sh ${CMAKE_BINARY_DIR} ${_batches})
  # the longest tests of the suite: COST makes ctest -j start them first
  set_tests_properties(${_g} PROPERTIES LABELS "rdma;guest;release" TIMEOUT 3700
                       COST 10000 FIXTURES_SETUP ${_fx})
  list(APPEND _guest_tests ${_g})
  foreach(_b IN LISTS _batches)
    set(ING_RXE_FIXTURE_${_b} ${_fx})
  endforeach()
endforeach()
foreach(_b main smp4 rails)
  set(_t rdma.rxe)
  if(_b STREQUAL "rails")
    set(_t rdma.rails)
  elseif(NOT _b STREQUAL "main")
    set(_t rdma.rxe_${_b})
  endif()
  add_test(NAME ${_t} COMMAND ${CMAKE_CURRENT_LIST_DIR}/rxe/batch_result.sh ${CMAKE_BINARY_DIR} ${_b})
  set_tests_properties(${_t} PROPERTIES LABELS "rdma;release" TIMEOUT 60)
  if(ING_RXE_FIXTURE_${_b})
    set_tests_properties(${_t} PROPERTIES FIXTURES_REQUIRED ${ING_RXE_FIXTURE_${_b}})
  endif()
endforeach()
if(TEST fault.powerloss AND ING_RXE_FIXTURE_powerloss)
  set_tests_properties(fault.powerloss PROPERTIES FIXTURES_REQUIRED ${ING_RXE_FIXTURE_powerloss})
endif()
# tests/rxe/dotnet_in_guest.sh runs the C# programs dotnet.build made on the host
# (only the boot that runs batch main needs them)
if(TEST dotnet.build)
  foreach(_g IN LISTS _guest_tests)
    get_test_property(${_g} FIXTURES_SETUP _fx)
    if(_fx STREQUAL "${ING_RXE_FIXTURE_main}")
      set_property(TEST ${_g} APPEND PROPERTY FIXTURES_REQUIRED dotnet_built)
    endif()
  endforeach()
endif()
add_executable(rxe_stats ${CMAKE_CURRENT_LIST_DIR}/rxe/rxe_stats.c)
target_link_libraries(rxe_stats PRIVATE ingest_static PkgConfig::RDMACM PkgConfig::IBVERBS)
# libingest's -EFAULT range check on RDMA against a real ingestd (tests/rxe/ctl_in_guest.sh)
add_executable(rdma_efault_check ${CMAKE_CURRENT_LIST_DIR}/rxe/efault_check.c)
target_link_libraries(rdma_efault_check PRIVATE ingest_static)
# ingest-send built against the test build of libingest with its fault-injection hooks
# (ING_TEST_HOOKS: producer/rdma_producer.c), for tests/rxe/rdma_in_guest.sh only; the
# shipped ingest-send and libingest.so.1 do not contain them.
add_executable(ingest_send_testhooks ${PROJECT_SOURCE_DIR}/apps/ingest-send.c)
target_link_libraries(ingest_send_testhooks PRIVATE ingest_testhooks)
