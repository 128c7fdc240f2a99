/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rail_state.c - the pure part of the rails (dataplane/rdma/rdma_rail.c): a port's
 * link rate from ibv_port_attr's active_speed and active_width as ibstat's Rate reads
 * them, the rail a session that names one gets (Negotiate: that rail when it is up; a
 * name no rail has, or a rail that is down, refused with every rail listed, up or down
 * with why and for how long), and that list on its own.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "dataplane/rdma/rdma.h"

static void test_link_mbps(void **state)
{
	(void)state;
	assert_int_equal(ing_rdma_link_mbps(1, 1), 2500);      /* SDR 1x: rxe on a netdev of unknown speed */
	assert_int_equal(ing_rdma_link_mbps(4, 2), 40000);     /* QDR 4x */
	assert_int_equal(ing_rdma_link_mbps(32, 2), 100000);   /* EDR 4x: a 100 GbE ConnectX */
	assert_int_equal(ing_rdma_link_mbps(64, 2), 200000);   /* HDR 4x */
	assert_int_equal(ing_rdma_link_mbps(128, 2), 400000);  /* NDR 4x */
	assert_int_equal(ing_rdma_link_mbps(64, 16), 100000);  /* HDR 2x */
	assert_int_equal(ing_rdma_link_mbps(16, 8), 168000);   /* FDR 12x */
	assert_int_equal(ing_rdma_link_mbps(0, 2), 0);         /* unknown speed */
	assert_int_equal(ing_rdma_link_mbps(32, 0), 0);        /* unknown width */
	assert_int_equal(ing_rdma_link_mbps(3, 2), 0);         /* not an IB_SPEED value */
}

static void rails2(struct ing_rdma_rail_info ri[2], uint64_t now)
{
	memset(ri, 0, 2 * sizeof(*ri));
	snprintf(ri[0].device, sizeof(ri[0].device), "mlx5_0");
	snprintf(ri[0].addr, sizeof(ri[0].addr), "10.0.0.1");
	ri[0].port = 4791;
	ri[0].up = true;
	snprintf(ri[1].device, sizeof(ri[1].device), "mlx5_1");
	snprintf(ri[1].addr, sizeof(ri[1].addr), "10.0.1.1");
	ri[1].port = 4791;
	ri[1].up = false;
	ri[1].link_down = true;
	ri[1].down_since_ns = now - 12500000000ull;   /* 12.5 s ago */
	snprintf(ri[1].why, sizeof(ri[1].why), "link down (port 1: IBV_EVENT_PORT_ERR)");
}

static void test_choose(void **state)
{
	(void)state;
	struct ing_rdma_rail_info ri[2];
	uint64_t now = 100000000000ull;
	char msg[512];

	rails2(ri, now);
	/* the rail named, up */
	msg[0] = 0;
	assert_int_equal(ing_rdma_rail_choose(ri, 2, "mlx5_0", now, msg, sizeof(msg)), 0);
	/* down: refused, with why, and every rail listed with its state */
	assert_int_equal(ing_rdma_rail_choose(ri, 2, "mlx5_1", now, msg, sizeof(msg)), -ENETDOWN);
	assert_string_equal(msg, "rail \"mlx5_1\" is down (link down (port 1: IBV_EVENT_PORT_ERR)); this "
				 "node's rails: mlx5_0 (up), mlx5_1 (down 12 s: link down (port 1: "
				 "IBV_EVENT_PORT_ERR))");
	/* back up: given */
	ri[1].up = true;
	ri[1].down_since_ns = 0;
	ri[1].why[0] = 0;
	assert_int_equal(ing_rdma_rail_choose(ri, 2, "mlx5_1", now, msg, sizeof(msg)), 1);
	/* a name no rail has (a device of the producer's own host, a typo): the rails there are */
	assert_int_equal(ing_rdma_rail_choose(ri, 2, "mlx5_2", now, msg, sizeof(msg)), -ENOENT);
	assert_string_equal(msg, "no rail \"mlx5_2\" on this node; its rails: mlx5_0 (up), mlx5_1 (up)");
	/* names are whole device names, not prefixes */
	assert_int_equal(ing_rdma_rail_choose(ri, 2, "mlx5_", now, msg, sizeof(msg)), -ENOENT);
	/* no rails at all */
	assert_int_equal(ing_rdma_rail_choose(ri, 0, "mlx5_0", now, msg, sizeof(msg)), -ENOENT);
	assert_string_equal(msg, "no rail \"mlx5_0\" on this node; its rails: none");
	/* a short buffer is cut, never overrun */
	char small[16];
	memset(small, 'x', sizeof(small));
	assert_int_equal(ing_rdma_rail_choose(ri, 2, "nope", now, small, 12), -ENOENT);
	assert_int_equal(strlen(small), 11);
	assert_int_equal(small[15], 'x');
}

static void test_describe(void **state)
{
	(void)state;
	struct ing_rdma_rail_info ri[2];
	uint64_t now = 100000000000ull;
	char buf[256];

	rails2(ri, now);
	ing_rdma_rails_describe(ri, 2, now, buf, sizeof(buf));
	assert_string_equal(buf, "mlx5_0 (up), mlx5_1 (down 12 s: link down (port 1: IBV_EVENT_PORT_ERR))");
	/* a rail down with no time known (never opened at start) and no reason */
	ri[1].down_since_ns = 0;
	ri[1].why[0] = 0;
	ing_rdma_rails_describe(ri, 2, now, buf, sizeof(buf));
	assert_string_equal(buf, "mlx5_0 (up), mlx5_1 (down 0 s: ?)");
	char tiny[8];
	ing_rdma_rails_describe(ri, 2, now, tiny, sizeof(tiny));
	assert_int_equal(strlen(tiny), 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_link_mbps),
		cmocka_unit_test(test_choose),
		cmocka_unit_test(test_describe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
