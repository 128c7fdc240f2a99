# SPDX-License-Identifier: Apache-2.0
# The node through its library API (control/node/node.h): start, a frame from libingest over
# loopback, stop from another thread, exit status, stored file and catalog row.
# Label "func": it runs in the ASan tree with the others (make test).
add_executable(node_api ${CMAKE_CURRENT_LIST_DIR}/node/node_api.c)
target_link_libraries(node_api PRIVATE ing_node ingest_static ing_store)
add_test(NAME func.node_api COMMAND node_api)
set_tests_properties(func.node_api PROPERTIES LABELS func TIMEOUT 180)
