/* SPDX-License-Identifier: Apache-2.0 */
/* rdma-dev and rdma-addr lists: "mlx5_0, mlx5_1@1", "10.0.1.1, 10.0.2.1" (numa.h). */
#include "numa/numa.h"
#include "numa/numa_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SEPS ", \t"

/* The next entry of a list into tok (NUL-terminated); NULL at the end. */
static const char *next_tok(const char *s, char *tok, size_t len, bool *too_long)
{
	s += strspn(s, SEPS);
	if (!*s)
		return NULL;
	size_t n = strcspn(s, SEPS);
	*too_long = n >= len;
	snprintf(tok, len, "%.*s", (int)(n < len ? n : len - 1), s);
	return s + n;
}

static bool dev_name_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') && !(*s >= '0' && *s <= '9') &&
		    *s != '_' && *s != '-' && *s != '.')
			return false;
	return true;
}

int ing_rail_list_parse(const char *s, struct ing_rail_spec *out, unsigned max, char *err,
			size_t errlen)
{
	char tok[ING_TOPO_NAME_MAX + 16];
	unsigned n = 0;
	bool too_long;

	if (!s)
		return 0;
	while ((s = next_tok(s, tok, sizeof(tok), &too_long))) {
		char *at = strchr(tok, '@');
		int node = -1;
		if (too_long)
			return set_err(err, errlen, EINVAL, "'%s...': device name too long", tok);
		if (at) {
			char *end;
			*at = '\0';
			long v = strtol(at + 1, &end, 10);
			if (!at[1] || *end || v < 0 || v > 1023)
				return set_err(err, errlen, EINVAL,
					       "'%s@%s': the NUMA node after '@' must be a number 0..1023 "
					       "(rxe1@1)", tok, at + 1);
			node = (int)v;
		}
		if (!dev_name_ok(tok))
			return set_err(err, errlen, EINVAL,
				       "'%s': not an RDMA device name (rdma link show lists them; "
				       "a list is 'mlx5_0, mlx5_1', a node override 'rxe1@1')", tok);
		for (unsigned i = 0; i < n; i++)
			if (!strcmp(out[i].dev, tok))
				return set_err(err, errlen, EINVAL, "'%s' is listed twice", tok);
		if (n == max)
			return set_err(err, errlen, EINVAL, "more than %u devices (one rail each)", max);
		snprintf(out[n].dev, sizeof(out[n].dev), "%s", tok);
		out[n].node = node;
		n++;
	}
	return (int)n;
}

int ing_addr_list_parse(const char *s, char (*out)[48], unsigned max, char *err, size_t errlen)
{
	char tok[64];
	unsigned n = 0;
	bool too_long;

	if (!s)
		return 0;
	while ((s = next_tok(s, tok, sizeof(tok), &too_long))) {
		unsigned char a[16];
		if (too_long || (inet_pton(AF_INET, tok, a) != 1 && inet_pton(AF_INET6, tok, a) != 1))
			return set_err(err, errlen, EINVAL, "'%s': not an IPv4 or IPv6 address", tok);
		for (unsigned i = 0; i < n; i++)
			if (!strcmp(out[i], tok))
				return set_err(err, errlen, EINVAL, "'%s' is listed twice", tok);
		if (n == max)
			return set_err(err, errlen, EINVAL, "more than %u addresses (one rail each)", max);
		snprintf(out[n], 48, "%s", tok);
		n++;
	}
	return (int)n;
}
