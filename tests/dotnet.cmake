# SPDX-License-Identifier: Apache-2.0
# C# (label "dotnet", release tree only: an ASan-built libingest cannot be loaded by
# dotnet). tests/dotnet/run.sh builds every C# project once (dotnet.build, the fixture the
# others need), then each test runs one program. Without the .NET SDK each prints a NOT
# RUN line and is reported skipped by ctest (exit 77), never passed.
#  - interop.seed_dotnet: Grpc.Net.Client against ingestd (tests/interop/dotnet/Interop:
#    seed client, ids, 64 MiB pushes, deadline/cancel, statuses, 300 streams and
#    EnableMultipleHttp2Connections, TLS, mTLS, auth token, GOAWAY at stop, and a
#    ControlStream open two minutes with PINGs, run concurrently with the rest)
set(_dn_run ${CMAKE_CURRENT_LIST_DIR}/dotnet/run.sh)
# the C layout of libingest's structs, for the binding's mirror-struct test
add_executable(dotnet_layout_dump ${CMAKE_CURRENT_LIST_DIR}/dotnet/layout_dump.c)
target_include_directories(dotnet_layout_dump PRIVATE ${PROJECT_SOURCE_DIR}/include)
add_test(NAME dotnet.build COMMAND ${_dn_run} build ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR})
# (COST: first of all, the main guest boot waits for it; TIMEOUT a cap for a hang: 140-365 s
# were seen on a busy 2-core host)
set_tests_properties(dotnet.build PROPERTIES LABELS dotnet TIMEOUT 1200 SKIP_RETURN_CODE 77
                     FIXTURES_SETUP dotnet_built COST 20000)
add_test(NAME interop.seed_dotnet COMMAND ${_dn_run} interop ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(interop.seed_dotnet PROPERTIES LABELS "interop;dotnet" TIMEOUT 900
                     SKIP_RETURN_CODE 77 FIXTURES_REQUIRED dotnet_built)
#  - dotnet.sdk_missing: the same steps on a PATH without dotnet: exit 77 and one NOT RUN
#    line each (what a machine without the SDK reports); needs no SDK, runs everywhere.
add_test(NAME dotnet.sdk_missing COMMAND ${CMAKE_CURRENT_LIST_DIR}/dotnet/sdk_missing.sh
                                         ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR})
set_tests_properties(dotnet.sdk_missing PROPERTIES LABELS func TIMEOUT 60)
#  - dotnet.binding: H3000.Ingest's xunit tests in one process (bindings/dotnet/
#    H3000.Ingest.Tests): mirror structs against tests/dotnet/layout_dump.c, loading by
#    the SONAME alone, 1,000 frames over the fallback checked by ingest-verify, the async
#    API, bad input (exceptions, nothing stored), dispose mid-flight (no leak), a killed
#    node, fleet failover, zero managed allocations on the steady path
add_test(NAME dotnet.binding COMMAND ${_dn_run} binding ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(dotnet.binding PROPERTIES LABELS dotnet TIMEOUT 900 SKIP_RETURN_CODE 77
                     FIXTURES_REQUIRED dotnet_built)
#  - dotnet.nuget_sample: make nuget's package (bindings/dotnet/pack.sh) in a local folder
#    feed; samples/dotnet restored from that feed alone, built, run against an ingestd
#    without LD_LIBRARY_PATH: it loads the package's libingest.so.1 and stores 40 frames
add_test(NAME dotnet.nuget_sample COMMAND ${_dn_run} sample ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(dotnet.nuget_sample PROPERTIES LABELS dotnet TIMEOUT 600 SKIP_RETURN_CODE 77
                     FIXTURES_REQUIRED dotnet_built)
