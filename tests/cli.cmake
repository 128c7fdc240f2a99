# SPDX-License-Identifier: Apache-2.0
# The programs as a new engineer meets them (labels func, ops):
#  - func.cli.conventions: --version, --help, one-line usage errors (exit 2), durations with
#    units and the old -ms spellings, one --sizes grammar, the doctor's help, the man pages;
#    every program, no node needed.
#  - func.cli.errors: the usual mistakes against a real ingestd, each with the words of its
#    message and its exit status: pool larger than memory, data dir a file, port in use,
#    cleartext vs TLS, no node, a conflict, a frame over --max-frame, ingest-bench against
#    a dead node, ingest-doctor --config.
set(_cli ${CMAKE_CURRENT_LIST_DIR}/cli)
add_test(NAME func.cli.conventions COMMAND bash ${_cli}/conventions.sh ${PROJECT_BINARY_DIR})
add_test(NAME func.cli.errors COMMAND bash ${_cli}/errors.sh ${PROJECT_BINARY_DIR})
set_tests_properties(func.cli.conventions func.cli.errors PROPERTIES LABELS "func;ops" TIMEOUT 180)
