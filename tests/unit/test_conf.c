/* SPDX-License-Identifier: Apache-2.0 */
/* test_conf.c - common/conf.c: key = value lines, bare keys, comments (whole-line and after a
 * value), quotes, errors with line numbers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/conf.h"

struct seen {
	unsigned n;
	char keys[8][32], vals[8][64];
	unsigned lines[8];
	int stop_at;   /* return 7 at this setting (1-based), 0: never */
};

static int collect(void *arg, const char *key, const char *value, unsigned line)
{
	struct seen *s = arg;
	if (s->n < 8) {
		snprintf(s->keys[s->n], sizeof(s->keys[0]), "%s", key);
		snprintf(s->vals[s->n], sizeof(s->vals[0]), "%s", value ? value : "(null)");
		s->lines[s->n] = line;
	}
	s->n++;
	return s->stop_at && (int)s->n == s->stop_at ? 7 : 0;
}

static char path[64];

static void put(const char *text)
{
	snprintf(path, sizeof(path), "/tmp/test_conf.%d", (int)getpid());
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_good(void **state)
{
	char buf[1024], why[128];
	unsigned line;
	struct seen s = { 0 };
	(void)state;
	put("# a comment\n\n  listen = 127.0.0.1:0  \n"
	    "data-dir=/tmp/a b\n"
	    "\t# indented comment\n"
	    "tls-key = \"  /k #1 \"\n"
	    "empty =\n"
	    "last = no newline");
	assert_int_equal(ing_conf_read(path, buf, sizeof(buf), collect, &s, &line, why, sizeof(why)), 0);
	assert_int_equal(s.n, 5);
	assert_string_equal(s.keys[0], "listen");
	assert_string_equal(s.vals[0], "127.0.0.1:0");
	assert_int_equal(s.lines[0], 3);
	assert_string_equal(s.vals[1], "/tmp/a b");
	assert_string_equal(s.vals[2], "  /k #1 ");
	assert_int_equal(s.lines[2], 6);
	assert_string_equal(s.keys[3], "empty");
	assert_string_equal(s.vals[3], "");
	assert_string_equal(s.vals[4], "no newline");
	assert_int_equal(s.lines[4], 8);
	unlink(path);
}

/* what an operator writes: comments after values, bare on/off keys */
static void test_comments_and_bare_keys(void **state)
{
	char buf[1024], why[128];
	unsigned line;
	struct seen s = { 0 };
	(void)state;
	put("frame-timeout = 30s # per frame\n"
	    "data-dir = /srv/a#b\n"
	    "drain\n"
	    "  json   # a bare key with a comment\n"
	    "tls-key = \"/k # not a comment\"   # a comment\n"
	    "empty = # nothing\n"
	    "tab = x\t# after a tab\n");
	assert_int_equal(ing_conf_read(path, buf, sizeof(buf), collect, &s, &line, why, sizeof(why)), 0);
	assert_int_equal(s.n, 7);
	assert_string_equal(s.vals[0], "30s");
	assert_string_equal(s.vals[1], "/srv/a#b");   /* '#' inside a word is the value's */
	assert_string_equal(s.keys[2], "drain");
	assert_string_equal(s.vals[2], "(null)");    /* collect()'s spelling of value NULL */
	assert_int_equal(s.lines[2], 3);
	assert_string_equal(s.keys[3], "json");
	assert_string_equal(s.vals[3], "(null)");
	assert_string_equal(s.vals[4], "/k # not a comment");
	assert_string_equal(s.vals[5], "");
	assert_string_equal(s.vals[6], "x");

	put("a = \"x\" y\n");
	assert_int_equal(ing_conf_read(path, buf, sizeof(buf), collect, &s, &line, why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(line, 1);
	assert_non_null(strstr(why, "after the quoted value"));
	unlink(path);
}

static void test_errors(void **state)
{
	char buf[256], why[128];
	unsigned line;
	struct seen s = { 0 };
	(void)state;
	put("a = 1\nno equals sign here\n");
	assert_int_equal(ing_conf_read(path, buf, sizeof(buf), collect, &s, &line, why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(line, 2);
	assert_non_null(strstr(why, "key = value"));

	put("\n\nbad key! = 1\n");
	assert_int_equal(ing_conf_read(path, buf, sizeof(buf), collect, &s, &line, why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(line, 3);

	put("k = \"open\n");
	assert_int_equal(ing_conf_read(path, buf, sizeof(buf), collect, &s, &line, why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(line, 1);

	/* the callback's verdict comes back with its line */
	memset(&s, 0, sizeof(s));
	s.stop_at = 2;
	put("a = 1\n# x\nb = 2\nc = 3\n");
	assert_int_equal(ing_conf_read(path, buf, sizeof(buf), collect, &s, &line, why, sizeof(why)), 7);
	assert_int_equal(line, 3);
	assert_int_equal(s.n, 2);

	/* too large for the buffer: refused, not cut */
	char big[400];
	memset(big, '#', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	put(big);
	assert_int_equal(ing_conf_read(path, buf, sizeof(buf), collect, &s, &line, why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "larger"));
	unlink(path);

	assert_int_equal(ing_conf_read("/nonexistent/x.conf", buf, sizeof(buf), collect, &s, &line,
				       why, sizeof(why)), -ENOENT);
	assert_int_equal(line, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_comments_and_bare_keys),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
