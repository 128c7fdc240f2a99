/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_eal.h - the unit tests' DPDK EAL: started once per test group on lcore 0 (the
 * calling thread, pinned there), mem_mb MiB of memory (0: EAL's default). eal_setup /
 * eal_teardown are the cmocka group fixtures of the tests that need nothing else (64 MiB).
 */
#ifndef ING_TEST_EAL_H
#define ING_TEST_EAL_H

#include "dataplane/dataplane.h"

static inline int test_eal_start(unsigned mem_mb)
{
	struct ing_eal_opts o;
	ing_eal_opts_init(&o);
	o.lcores = "0";
	if (mem_mb)
		o.mem_mb = mem_mb;
	return ing_eal_start(&o) == 0 ? 0 : -1;
}

static inline int eal_setup(void **state)
{
	(void)state;
	return test_eal_start(64);
}

static inline int eal_teardown(void **state)
{
	(void)state;
	ing_eal_stop();
	return 0;
}

#endif
