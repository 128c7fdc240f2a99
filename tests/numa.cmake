# SPDX-License-Identifier: Apache-2.0
# numa/: ingest-topo and ingest-doctor as a user runs them (label "func").
#  - func.numa.doctor_live: the real pre-flight check of this machine, data dir in /tmp;
#    asserts the report has every section and a summary, and that the exit status matches
#    the FAIL count (a FAIL that is real on this machine is reported, not hidden).
#  - func.numa.topo_live:   ingest-topo --json on the live machine parses and has a plan.
#  - func.numa.cli:         both programs on the shipped fixtures: exit codes, warnings.
set(_numa_dir ${CMAKE_CURRENT_LIST_DIR}/numa)
add_test(NAME func.numa.doctor_live
         COMMAND bash ${_numa_dir}/doctor_live.sh $<TARGET_FILE:ingest-doctor>)
add_test(NAME func.numa.topo_live
         COMMAND bash ${_numa_dir}/topo_live.sh $<TARGET_FILE:ingest-topo>)
add_test(NAME func.numa.cli
         COMMAND bash ${_numa_dir}/cli.sh $<TARGET_FILE:ingest-topo> $<TARGET_FILE:ingest-doctor>
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(func.numa.doctor_live func.numa.topo_live func.numa.cli
                     PROPERTIES LABELS func TIMEOUT 60)
