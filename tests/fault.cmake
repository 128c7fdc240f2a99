# SPDX-License-Identifier: Apache-2.0
# Fault suite, short form (label "fault", release tree; `make fault` runs the long form):
#  - fault.kill9: kill -9 of ingestd or of ingest-send at random moments, DURABLE
#    manifests verified (3 rounds here, FAULT_ITERATIONS=50 in make fault);
#  - fault.disk_full: a small loop-mounted ext4 fills up: retryable NO_SPACE, nothing
#    partial, resume without a restart;
#  - fault.freeze: fsfreeze under a stream: memory bounded, health up, all lands after the
#    thaw; SIGTERM while frozen exits 3.
# disk_full and freeze need root (loop devices): not root, they FAIL with that message.
add_test(NAME fault.kill9 COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fault/kill9.sh ${PROJECT_BINARY_DIR} 3)
add_test(NAME fault.disk_full COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fault/disk_full.sh ${PROJECT_BINARY_DIR})
add_test(NAME fault.freeze COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fault/freeze.sh ${PROJECT_BINARY_DIR})
# They run beside other tests (ctest -j): no verdict of theirs depends on the machine's
# speed. disk_full and freeze each make a loop device and freeze a filesystem: resource
# lock loopdev (losetup -f of two tests at once could race).
set_tests_properties(fault.kill9 fault.disk_full fault.freeze PROPERTIES LABELS fault TIMEOUT 600)
set_tests_properties(fault.disk_full fault.freeze PROPERTIES RESOURCE_LOCK loopdev)

# Power-loss harness (docs/POWERLOSS.md): its replay tool for dm-log-writes logs, the
# no-sync LD_PRELOAD of its negative control and its Health+Stats probe. dm-log-writes
# needs a kernel with it (the host's may not have it): tests/fault/powerloss_in_guest.sh
# runs in the Soft-RoCE qemu guest as batch powerloss of the one guest boot, rdma.guest
# (tests/rdma.cmake), and fault.powerloss reports that batch; `make fault` boots the guest
# for the long form (every replay point, tests/fault/powerloss.sh long).
add_executable(lw_replay ${CMAKE_CURRENT_LIST_DIR}/fault/lw_replay.c ${CMAKE_CURRENT_LIST_DIR}/fault/lw_log.c)
target_sources(test_lw_log PRIVATE ${CMAKE_CURRENT_LIST_DIR}/fault/lw_log.c)
target_include_directories(test_lw_log PRIVATE ${CMAKE_CURRENT_LIST_DIR}/fault)
add_library(ing_nosync MODULE ${CMAKE_CURRENT_LIST_DIR}/fault/nosync.c)
set_target_properties(ing_nosync PROPERTIES PREFIX "" OUTPUT_NAME nosync)
add_executable(pl_probe ${CMAKE_CURRENT_LIST_DIR}/fault/pl_probe.c)
target_link_libraries(pl_probe PRIVATE ingest_static)
add_test(NAME fault.powerloss
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/rxe/batch_result.sh ${CMAKE_BINARY_DIR} powerloss)
# (its boot: ING_RXE_BOOTS, tests/rdma.cmake, included after this file)
set_tests_properties(fault.powerloss PROPERTIES LABELS "fault;guest;release" TIMEOUT 60)
