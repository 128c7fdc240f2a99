# SPDX-License-Identifier: Apache-2.0
# The object store tier against a real store (label tier): tests/tier/tier_store.sh starts
# a single-node Ceph once (tests/tier/ceph_lib.sh: monitor, OSD on a sparse BlueStore file,
# radosgw; loopback, a private temp dir, torn down on exit) and runs every case on it:
# bad input, wrong credentials, a missing bucket, 500 frames of 1-64 MiB tiered and read
# back (boto3, ingest-get, ingest-verify --tier), kill -9 of ingestd, of the OSD and of
# radosgw mid-upload, the store down at the high-water mark. About 4-5 minutes on a loaded
# 2-core machine. Release tree only, like the fleet's multi-process tests (label release),
# and the tier's code runs in the ASan tree
# through unit.test_tier_db and unit.test_s3. The Ceph packages come from
# deploy/install-deps.sh; without them the test fails saying which one is missing.
#
# tier.faults: the tier against a store that misbehaves (tests/tier/tier_faults.sh): its own
# single-node Ceph on free ports and a fault-injecting proxy of ours (tests/tier/s3proxy.py)
# between node and radosgw; 5xx and resets, a stall, a store that acknowledges and keeps
# nothing, one that keeps altered bytes, bytes altered in transit, a HEAD with a wrong
# length, clock skew. About 3 minutes; private ports, temp dirs and processes, so it runs
# beside other tests (no RUN_SERIAL: it needs nothing global). Release tree only, as
# tier.store.
if(NOT ING_SANITIZE AND NOT ING_SANITIZE_THREAD)
  add_test(NAME tier.store COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tier/tier_store.sh ${PROJECT_BINARY_DIR})
  # beside the other tests (ctest -j; Ceph on random ports in a private dir); each Ceph
  # wait a condition with a cap for a hang (CEPH_WAIT, 60 s in ceph_lib.sh: 300 s here,
  # for a busy machine); COST: the longest host tests, started early
  set_tests_properties(tier.store PROPERTIES LABELS tier TIMEOUT 1800 COST 3000
                       ENVIRONMENT CEPH_WAIT=300)
  add_test(NAME tier.faults COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tier/tier_faults.sh ${PROJECT_BINARY_DIR})
  set_tests_properties(tier.faults PROPERTIES LABELS tier TIMEOUT 1800 COST 2500
                       ENVIRONMENT CEPH_WAIT=300)
endif()
