/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_catalog_dir.h - the unit tests' fixture for a catalog on disk: a fresh temp dir
 * (dir) and the path of a catalog.db in it (db), removed again after the test or group.
 * Define CATALOG_DIR_TEMPLATE ("/tmp/ing_test_NAME.XXXXXX") before including it; pass
 * catalog_dir_setup / catalog_dir_teardown to cmocka.
 */
#ifndef ING_TEST_CATALOG_DIR_H
#define ING_TEST_CATALOG_DIR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[64], db[128];

static int catalog_dir_setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "%s", CATALOG_DIR_TEMPLATE);
	if (!mkdtemp(dir))
		return -1;
	snprintf(db, sizeof(db), "%s/catalog.db", dir);
	return 0;
}

static int catalog_dir_teardown(void **state)
{
	(void)state;
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

#endif
