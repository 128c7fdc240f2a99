# SPDX-License-Identifier: Apache-2.0
# The ingest service (control/service/) against real clients: Debian's python3-grpcio talks
# to a real ingestd on loopback (port 0) with a temp data dir, real files and SQLite.
#  - interop.grpcio: Negotiate, ControlStream (lock-step, 10k pipelined), PushFrames,
#    duplicates, cancel, deadline, UNIMPLEMENTED, health, oversize, Stats, SIGTERM drain;
#    string ids (T5): acks echo them, escaped file names, catalog keeps them, wafers apart.
#  - func.bad_input: every malformed / hostile input, each followed by a good frame and a
#    check that every pool slot came back.
# The interpreter is Debian's (grpcio lives there), not whatever python3 is first in PATH.
set(ING_TEST_PYTHON /usr/bin/python3 CACHE FILEPATH "python3 with grpcio and grpc_tools")
set(_svc_py ${CMAKE_CURRENT_LIST_DIR}/interop/test_interop.py)
set(_svc_args --ingestd $<TARGET_FILE:ingestd> --proto-dir ${PROJECT_SOURCE_DIR}/proto)
add_test(NAME interop.grpcio
         COMMAND ${ING_TEST_PYTHON} ${_svc_py} ${_svc_args}
                 --work ${CMAKE_BINARY_DIR}/test-work/interop -k T1 -k T2 -k T3 -k T5 -k T9)
set_tests_properties(interop.grpcio PROPERTIES LABELS "interop;func" TIMEOUT 180)
add_test(NAME func.bad_input
         COMMAND ${ING_TEST_PYTHON} ${_svc_py} ${_svc_args}
                 --work ${CMAKE_BINARY_DIR}/test-work/bad_input -k T4)
set_tests_properties(func.bad_input PROPERTIES LABELS "func;interop" TIMEOUT 180)
