# SPDX-License-Identifier: Apache-2.0
# Review tests (label func): crash and restart, start-up errors, flag errors, sessions, authentication.
#  - func.review.restart_kill9: kill -9 of ingestd mid-stream, restart on the same data
#    dir, every DURABLE-acked frame intact, re-send all (tests/review/restart_kill9.sh).
#  - func.review.startup: every ingestd flag with a bad value -> one line, exit 2; data dir
#    unusable (a file, read-only, full) -> one clear line, exit 1 (tests/review/startup.sh).
add_test(NAME func.review.restart_kill9
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/review/restart_kill9.sh ${PROJECT_BINARY_DIR})
set_tests_properties(func.review.restart_kill9 PROPERTIES LABELS func TIMEOUT 300)
add_test(NAME func.review.startup
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/review/startup.sh ${PROJECT_BINARY_DIR})
set_tests_properties(func.review.startup PROPERTIES LABELS func TIMEOUT 300)
#  - func.review.sessions: a full session table evicts the session idle longest, never one
#    with an open stream (python3-grpcio against ingestd --max-sessions 2).
set(ING_TEST_PYTHON /usr/bin/python3 CACHE FILEPATH "python3 with grpcio and grpc_tools")
add_test(NAME func.review.sessions
         COMMAND ${ING_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/review/sessions.py
                 --ingestd $<TARGET_FILE:ingestd> --proto-dir ${PROJECT_SOURCE_DIR}/proto
                 --work ${CMAKE_BINARY_DIR}/test-work/review-sessions)
set_tests_properties(func.review.sessions PROPERTIES LABELS "func;interop" TIMEOUT 120)
#  - func.review.fcfs: pool slots are first come, first served: a 6 MiB frame waiting for
#    the only slot that holds it is not starved by another stream's flow of small frames.
add_test(NAME func.review.fcfs
         COMMAND ${ING_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/review/fcfs.py
                 --ingestd $<TARGET_FILE:ingestd> --proto-dir ${PROJECT_SOURCE_DIR}/proto
                 --work ${CMAKE_BINARY_DIR}/test-work/review-fcfs)
set_tests_properties(func.review.fcfs PROPERTIES LABELS "func;interop" TIMEOUT 200)
#  - func.review.auth: ingestd --auth-token-file: Negotiate without/with a wrong token, streams
#    naming no session and Stats without 'authorization: Bearer' are UNAUTHENTICATED and
#    store nothing; the right token stores DURABLE; health stays open; a mode-644 token file
#    is exit 2; ingest-send --auth-token-file right/wrong (python3-grpcio + ingest-send).
add_test(NAME func.review.auth
         COMMAND ${ING_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/review/auth.py
                 --ingestd $<TARGET_FILE:ingestd> --ingest-send $<TARGET_FILE:ingest-send>
                 --proto-dir ${PROJECT_SOURCE_DIR}/proto
                 --work ${CMAKE_BINARY_DIR}/test-work/review-auth)
set_tests_properties(func.review.auth PROPERTIES LABELS "func;interop" TIMEOUT 120)
#  - func.review.protocol: with --auth-token-file a ControlStream without a session is
#    UNAUTHENTICATED before its message is judged; a PushFrames frame refused on its first
#    chunk gets exactly one answer; UNIMPLEMENTED for a compressed message names
#    grpc-accept-encoding (python3-grpcio + a raw HTTP/2 client, python3-h2).
add_test(NAME func.review.protocol
         COMMAND ${ING_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/review/protocol.py
                 --ingestd $<TARGET_FILE:ingestd> --proto-dir ${PROJECT_SOURCE_DIR}/proto
                 --work ${CMAKE_BINARY_DIR}/test-work/review-protocol)
set_tests_properties(func.review.protocol PROPERTIES LABELS "func;interop" TIMEOUT 120)
#  - func.review.migrate: a data dir with a schema-1 catalog (INTEGER frame ids) is migrated
#    on start and served: rows found by decimal id, duplicates, conflicts (tests/review/migrate.sh).
add_test(NAME func.review.migrate
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/review/migrate.sh ${PROJECT_BINARY_DIR})
set_tests_properties(func.review.migrate PROPERTIES LABELS func TIMEOUT 180)
