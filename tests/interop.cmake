# SPDX-License-Identifier: Apache-2.0
# The seed contract (tests/interop/seed/rdma_stream.proto, a byte-for-byte copy of the
# original wire contract) and stock clients generated from it (label "interop").
#  - interop.seed_contract: seed and proto/h3000.proto compiled to descriptor sets; every
#    seed field of FrameMeta/Ack (number, name, type, label), the package, the service and
#    the ControlStream signature must be unchanged; mutated copies must be caught.
set(ING_TEST_PYTHON /usr/bin/python3 CACHE FILEPATH "python3 with grpcio and grpc_tools")
set(_seed_dir ${CMAKE_CURRENT_LIST_DIR}/interop)
add_test(NAME interop.seed_contract
         COMMAND ${ING_TEST_PYTHON} ${_seed_dir}/seed_contract.py
                 --seed ${_seed_dir}/seed/rdma_stream.proto
                 --proto ${PROJECT_SOURCE_DIR}/proto/h3000.proto
                 --work ${CMAKE_BINARY_DIR}/test-work/seed-contract)
set_tests_properties(interop.seed_contract PROPERTIES LABELS interop TIMEOUT 60)
#  - interop.seed_grpcio: python3-grpcio with stubs generated from the seed fixture alone,
#    no Negotiate: 500 GUID frames without waferId on one ControlStream -> exactly one Ack
#    per frame naming it, clear NACKs (no RDMA here); ids breaking the rule (empty, 257
#    bytes, control characters) -> ok=false naming the rule; the stream ends with OK.
add_test(NAME interop.seed_grpcio
         COMMAND ${ING_TEST_PYTHON} ${_seed_dir}/seed_grpcio.py
                 --ingestd $<TARGET_FILE:ingestd> --proto-dir ${_seed_dir}/seed
                 --work ${CMAKE_BINARY_DIR}/test-work/seed-grpcio)
set_tests_properties(interop.seed_grpcio PROPERTIES LABELS "interop;func" TIMEOUT 120)
#  - interop.seed_node: Node.js @grpc/grpc-js (tests/interop/node, packages from its lock
#    file, installed by deploy/install-deps.sh), protos loaded at run time: health SERVING;
#    500 seed frames on ControlStream with one final Ack each; ids outside the rule (also
#    not UTF-8: a lone surrogate) -> ok=false naming it; Negotiate ackReceived -> RECEIVED
#    then DURABLE, without it DURABLE only; PushFrames of 20 x 4 MiB in
#    Negotiate's maxChunkSize, DURABLE, byte-exact on disk; no waferId -> default wafer,
#    timestamp as sent; 8 concurrent streams; deadline and cancel mid-stream leave the node
#    healthy; unknown method -> UNIMPLEMENTED. Fails with a clear message without node.
find_program(ING_NODE NAMES node nodejs)
if(NOT ING_NODE)
  set(ING_NODE node)
endif()
add_test(NAME interop.seed_node
         COMMAND ${ING_NODE} ${_seed_dir}/node/seed_interop.js
                 --ingestd $<TARGET_FILE:ingestd> --seed-proto ${_seed_dir}/seed/rdma_stream.proto
                 --proto-dir ${PROJECT_SOURCE_DIR}/proto
                 --work ${CMAKE_BINARY_DIR}/test-work/seed-node)
set_tests_properties(interop.seed_node PROPERTIES LABELS "interop;func" TIMEOUT 300)
