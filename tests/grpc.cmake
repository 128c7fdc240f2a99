# SPDX-License-Identifier: Apache-2.0
# gRPC transport (control/net/loop.c, control/net/grpc_*.c) against a stock client (label "func").
#  - grpc_testsrv: the transport with test methods only (tests/func/grpc_testsrv.c); links
#    just the transport objects, so it builds without the service code.
#  - func.grpc.interop_py: Debian's python3-grpcio drives it over h2c and TLS (ALPN h2):
#    unary, metadata, 1 MiB, health, UNIMPLEMENTED, RESOURCE_EXHAUSTED, deadlines, cancel,
#    bidi/client/server streaming, graceful shutdown. Fails with a clear message when
#    grpcio is missing.
#  - grpc_testcli + func.grpc.client_interop_py: our client (control/net/grpc_client.c) against
#    a stock grpcio server: unary, 1 MiB, UNIMPLEMENTED, status + percent-encoded message,
#    deadline, bidi, zero-copy client streaming through 16 KiB frames, server streaming,
#    cancel.
add_executable(grpc_testsrv ${CMAKE_CURRENT_LIST_DIR}/func/grpc_testsrv.c)
target_link_libraries(grpc_testsrv PRIVATE ing_net_server)
add_executable(grpc_testcli ${CMAKE_CURRENT_LIST_DIR}/func/grpc_testcli.c)
target_link_libraries(grpc_testcli PRIVATE ing_net_client)
find_program(ING_SYSTEM_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT ING_SYSTEM_PYTHON3)
  set(ING_SYSTEM_PYTHON3 /usr/bin/python3)
endif()
add_test(NAME func.grpc.interop_py
         COMMAND ${ING_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/func/grpc_interop.py
                 $<TARGET_FILE:grpc_testsrv>)
add_test(NAME func.grpc.client_interop_py
         COMMAND ${ING_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/func/grpc_client_interop.py
                 $<TARGET_FILE:grpc_testcli>)
set_tests_properties(func.grpc.interop_py func.grpc.client_interop_py
                     PROPERTIES LABELS func TIMEOUT 180)
