# SPDX-License-Identifier: Apache-2.0
# The object store tier against a real store (label tier): tests/tier/tier_store.sh uses
# a single-node Ceph (tests/tier/ceph_lib.sh: monitor, OSD on a sparse BlueStore file,
# radosgw; loopback, a private temp dir, torn down on exit) and runs every case on it:
# bad input, wrong credentials, a missing bucket, 500 frames of 1-64 MiB tiered and read
# back (boto3, ingest-get, ingest-verify --tier), kill -9 of ingestd, of the OSD and of
# radosgw mid-upload, the store down at the high-water mark, ingest-catalog prune beside a
# node that tiers. About 5-6 minutes on a loaded
# 2-core machine. Release tree only, like the fleet's multi-process tests (label release),
# and the tier's code runs in the ASan tree
# through unit.test_tier_db and unit.test_s3. The Ceph packages come from
# deploy/install-deps.sh; without them the test fails saying which one is missing.
#
# tier.faults: the tier against a store that misbehaves (tests/tier/tier_faults.sh): a
# single-node Ceph on free ports and a fault-injecting proxy of ours (tests/tier/s3proxy.py)
# between node and radosgw; 5xx and resets, a stall, a store that acknowledges and keeps
# nothing, one that keeps altered bytes, bytes altered in transit, a HEAD with a wrong
# length, clock skew. About 3 minutes; private ports, temp dirs and processes, so it runs
# beside other tests (no RUN_SERIAL: it needs nothing global). Release tree only, as
# tier.store.
#
# tier.cleanup: a tier test killed with SIGKILL (no trap runs) leaves nothing running: its
# Ceph daemons, ingestd and Stats client die with its shell (parent-death signal), and the
# next test's start removes its dirs (tests/tier/tier_cleanup.sh; ~1 minute).
#
# tier.ceph_up / tier.ceph_down (fixture tier_ceph): one Ceph monitor and OSD for the run,
# shared by tier.store and tier.faults (tests/tier/tier_ceph.sh): its cold start is paid
# once; each test starts its own radosgw on it and uses its own buckets (no test reads
# another's data), tier.store's kill -9 of the OSD waits for tier.faults' current case
# (a lock in ceph_lib.sh). The keeper that owns the daemons watches ctest: ctest killed,
# they go with it (tier.cleanup step 3). ctest runs the fixture with either test when
# only one is chosen (ctest -R tier.faults); alone, outside ctest, a script starts a
# whole Ceph of its own as before.
#
# Where the tier tests' CPU goes (utime+stime of the test's process tree, sampled each
# second and at each step line; a 2-core machine at load 10-13): tier.store alone, its own
# Ceph, ~144 CPU-s in all: the cold start of mon + OSD + radosgw 3.4, frames500 60 (now
# 41: 1.0 GiB instead of 1.6 GB, one boto3 start for its eight read-backs; same checks),
# kill9 12, osd 18, rgw 12, highwater 19, prune ~10, the small steps 0-4 each. Ceph idle
# costs little: mon, OSD and radosgw took 0.59 CPU-s in 60 s (radosgw's 600 threads 0.36
# of it), ~9 CPU-s over a whole run, so thread pools, tick intervals and log levels are
# left as they are; the OSD stays on BlueStore (memstore would lose what step osd reads
# back after the OSD's kill -9). What costs is Python starting: each boto3 client
# (tests/tier/s3tool.py) ~0.7 CPU-s, each grpcio import (tier_rpc.py) ~0.15; and the
# keeper's once-a-second round, 18.5 ms of CPU with sed, cut and cat (~10 CPU-s a run),
# 0.65 ms with bash builtins.
if(NOT ING_SANITIZE AND NOT ING_SANITIZE_THREAD)
  set(_ceph_env ${CMAKE_CURRENT_BINARY_DIR}/tier-ceph.env)
  add_test(NAME tier.ceph_up COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tier/tier_ceph.sh up ${_ceph_env})
  set_tests_properties(tier.ceph_up PROPERTIES LABELS tier TIMEOUT 900 COST 4000
                       FIXTURES_SETUP tier_ceph ENVIRONMENT CEPH_WAIT=300)
  add_test(NAME tier.ceph_down COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tier/tier_ceph.sh down ${_ceph_env})
  set_tests_properties(tier.ceph_down PROPERTIES LABELS tier TIMEOUT 300
                       FIXTURES_CLEANUP tier_ceph ENVIRONMENT CEPH_WAIT=60)
  add_test(NAME tier.store COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tier/tier_store.sh ${PROJECT_BINARY_DIR})
  # beside the other tests (ctest -j; Ceph on random ports in a private dir); each Ceph
  # wait a condition with a cap for a hang (CEPH_WAIT, 60 s in ceph_lib.sh: 300 s here,
  # for a busy machine); COST: the longest host tests, started early
  set_tests_properties(tier.store PROPERTIES LABELS tier TIMEOUT 1800 COST 3000
                       FIXTURES_REQUIRED tier_ceph ENVIRONMENT "CEPH_WAIT=300;CEPH_SHARED=${_ceph_env}")
  add_test(NAME tier.faults COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tier/tier_faults.sh ${PROJECT_BINARY_DIR})
  set_tests_properties(tier.faults PROPERTIES LABELS tier TIMEOUT 1800 COST 2500
                       FIXTURES_REQUIRED tier_ceph ENVIRONMENT "CEPH_WAIT=300;CEPH_SHARED=${_ceph_env}")
  add_test(NAME tier.cleanup COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tier/tier_cleanup.sh ${PROJECT_BINARY_DIR})
  set_tests_properties(tier.cleanup PROPERTIES LABELS tier TIMEOUT 900 ENVIRONMENT CEPH_WAIT=300)
endif()
