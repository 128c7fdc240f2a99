/* SPDX-License-Identifier: Apache-2.0 */
/*
 * common/cli.c and the duration / size-list grammars of common/parse.c: what every program's
 * command line does with good and bad input (one usage line, exit 2; --help and --version;
 * old "-ms" spellings; config-file keys).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/cli.h"
#include "common/parse.h"

static void durations(void **state)
{
	(void)state;
	static const struct { const char *s; uint64_t bare, ms; } ok[] = {
		{ "30s", 1000, 30000 }, { "500ms", 1000, 500 }, { "2m", 1000, 120000 },
		{ "1h", 1000, 3600000 }, { "1.5s", 1000, 1500 }, { "0.25s", 1, 250 },
		{ "30", 1000, 30000 }, { "30", 1, 30 }, { "5min", 1, 300000 }, { "0", 1000, 0 },
		{ "7d", 1000, 604800000 }, { "0.5d", 1, 43200000 },
		/* compound: from the largest unit down, added up */
		{ "2h30m", 1000, 9000000 }, { "1m30s", 1, 90000 }, { "1d12h", 1000, 129600000 },
		{ "1s500ms", 1000, 1500 }, { "1h0m5s", 1000, 3605000 }, { "1min30s", 1000, 90000 },
		{ "1.5h30m", 1000, 7200000 },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		uint64_t v = 7;
		assert_int_equal(ing_parse_duration_ms(ok[i].s, ok[i].bare, UINT64_MAX, &v), 0);
		assert_true(v == ok[i].ms);
	}
	static const char *const bad[] = { "", "s", "-1s", "1.5ms", "1.s", "10 s", "3x", "1e3", "1sec",
					   "30m2h", "1h1h", "1h30", "2h 30m", "1m30", "1s5", "ms", "1h-30m" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v = 7;
		assert_int_equal(ing_parse_duration_ms(bad[i], 1000, UINT64_MAX, &v), -EINVAL);
		assert_true(v == 7);
	}
	uint64_t v;
	assert_int_equal(ing_parse_duration_ms("30", 0, UINT64_MAX, &v), -EINVAL); /* unit required */
	assert_int_equal(ing_parse_duration_ms("2h", 1000, 3600000, &v), -ERANGE);
	assert_int_equal(ing_parse_duration_ms("59m61s", 1000, 3600000, &v), -ERANGE);
	assert_int_equal(ing_parse_duration_ms("99999999999999999999h", 1000, UINT64_MAX, &v), -ERANGE);
	char b[32];
	assert_string_equal(ing_fmt_duration(30000, b, sizeof(b)), "30s");
	assert_string_equal(ing_fmt_duration(120000, b, sizeof(b)), "2m");
	assert_string_equal(ing_fmt_duration(1500, b, sizeof(b)), "1500ms");
	assert_string_equal(ing_fmt_duration(7200000, b, sizeof(b)), "2h");
	assert_string_equal(ing_fmt_duration(172800000, b, sizeof(b)), "48h");
	assert_string_equal(ing_fmt_duration(0, b, sizeof(b)), "0s");
}

static void size_lists(void **state)
{
	(void)state;
	struct ing_size_range r[ING_SIZES_MAX];
	unsigned n = 0;
	char why[160];

	assert_int_equal(ing_parse_sizes("4M", r, ING_SIZES_MAX, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 1);
	assert_true(r[0].lo == 4u << 20 && r[0].hi == 4u << 20);
	assert_int_equal(ing_parse_sizes("1M-16M", r, ING_SIZES_MAX, &n, why, sizeof(why)), 0);
	assert_true(n == 1 && r[0].lo == 1u << 20 && r[0].hi == 16u << 20);
	assert_int_equal(ing_parse_sizes("64K,4M,16M-64M", r, ING_SIZES_MAX, &n, why, sizeof(why)), 0);
	assert_true(n == 3 && r[0].lo == 65536 && r[1].hi == 4u << 20 && r[2].lo == 16u << 20 &&
		    r[2].hi == 64u << 20);
	static const struct { const char *s, *why; } bad[] = {
		{ "", "empty" }, { "4M,", "stray ','" }, { ",4M", "stray ','" }, { "16M-1M", "MIN-MAX" },
		{ "0", "at least 1 byte" }, { "4X", "'4X' is not a size" }, { "1M-", "is not a size" },
		{ "1,2,3,4,5,6,7,8,9", "more than 8" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		assert_int_equal(ing_parse_sizes(bad[i].s, r, ING_SIZES_MAX, &n, why, sizeof(why)), -EINVAL);
		if (!strstr(why, bad[i].why))
			fail_msg("'%s': why '%s' lacks '%s'", bad[i].s, why, bad[i].why);
	}
}

/* ---------------------------------------------------------------- a program's table */

struct cfg {
	const char *server;
	unsigned credits;
	unsigned timeout_ms;
	uint64_t size;
	int mode;
	bool json;
	const char *path;
};

static void cfg_init(void *p)
{
	struct cfg *c = p;
	memset(c, 0, sizeof(*c));
	c->server = "127.0.0.1:50051";
	c->credits = 8;
	c->timeout_ms = 60000;
	c->size = 4u << 20;
	c->mode = -1;
}

#define C struct cfg
static const struct ing_opt opts[] = {
	ING_OPT_STR_(C, "server", server, "ADDR", "the node (default 127.0.0.1:50051)"),
	ING_OPT_UINT_(C, "credits", credits, 1, 4096, "frames in flight"),
	ING_OPT_DURATION_(C, "frame-timeout", timeout_ms, 1000, 3600000, "a frame not durable by then fails"),
	ING_OPT_SIZE_(C, "size", size, 1, 64u << 20, "frame size"),
	ING_OPT_CHOICE_(C, "mode", mode, "auto=-1|on=1|off=0", "the mode"),
	ING_OPT_BOOL_(C, "json", json, "JSON summary"),
	ING_OPT_PATH_(C, "manifest", path, "PATH", "write a manifest"),
	ING_OPT_MS_ALIAS_(C, "frame-timeout-ms", timeout_ms, 1000, 3600000, "frame-timeout"),
};
static const struct ing_cli cli = {
	.prog = "prog", .synopsis = "[options] [FILE...]", .summary = "a test program",
	.opts = opts, .nopts = sizeof(opts) / sizeof(opts[0]), .max_args = 2,
	.init = cfg_init, .cfg_size = sizeof(struct cfg),
	.exit_status = "  0  ok\n  1  runtime failure\n  2  usage error\n",
};

/* run f with stdout or stderr (fd) captured into buf */
static int captured(int fd, char *buf, size_t cap, int (*f)(void *), void *arg)
{
	FILE *tmp = tmpfile();
	assert_non_null(tmp);
	fflush(fd == 1 ? stdout : stderr);
	int saved = dup(fd);
	dup2(fileno(tmp), fd);
	int rc = f(arg);
	fflush(fd == 1 ? stdout : stderr);
	dup2(saved, fd);
	close(saved);
	rewind(tmp);
	size_t n = fread(buf, 1, cap - 1, tmp);
	buf[n] = '\0';
	fclose(tmp);
	return rc;
}

struct run {
	char **argv;
	int argc;
	struct cfg c;
	int argi;
};

static int do_parse(void *p)
{
	struct run *r = p;
	cfg_init(&r->c);
	return ing_cli_parse(&cli, r->argc, r->argv, &r->c, &r->argi);
}

static int parse(struct run *r, char *out, size_t cap, int fd, ...)
{
	static char *argv[16];
	va_list ap;
	int n = 0;
	argv[n++] = "prog";
	va_start(ap, fd);
	for (char *a; (a = va_arg(ap, char *)) && n < 15;)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	r->argv = argv;
	r->argc = n;
	return captured(fd, out, cap, do_parse, r);
}

static unsigned lines(const char *s)
{
	unsigned n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void good_flags(void **state)
{
	(void)state;
	struct run r;
	char out[4096];

	assert_int_equal(parse(&r, out, sizeof(out), 2, "--credits", "16", "--frame-timeout", "2m",
			       "--size=64K", "--mode", "on", "--json", "a", "b", NULL), 0);
	assert_string_equal(out, "");
	assert_int_equal(r.c.credits, 16);
	assert_int_equal(r.c.timeout_ms, 120000);
	assert_true(r.c.size == 65536);
	assert_int_equal(r.c.mode, 1);
	assert_true(r.c.json);
	assert_int_equal(r.argi, 9);
	/* an old spelling keeps its unit (ms); a bare number on the new name is seconds */
	assert_int_equal(parse(&r, out, sizeof(out), 2, "--frame-timeout-ms", "1500", NULL), 0);
	assert_int_equal(r.c.timeout_ms, 1500);
	assert_int_equal(parse(&r, out, sizeof(out), 2, "--frame-timeout", "90", NULL), 0);
	assert_int_equal(r.c.timeout_ms, 90000);
	assert_int_equal(parse(&r, out, sizeof(out), 2, "--frame-timeout-ms", "3s", NULL), 0);
	assert_int_equal(r.c.timeout_ms, 3000);
	/* an empty string given on the command line is the empty string (ingest-send --wafer "") */
	assert_int_equal(parse(&r, out, sizeof(out), 2, "--server", "", NULL), 0);
	assert_non_null(r.c.server);
	assert_string_equal(r.c.server, "");
}

/* every mistake: exit 2, one line on stderr, naming the flag and "try 'prog --help'" */
static void bad_flags(void **state)
{
	(void)state;
	static const char *const cases[][4] = {
		{ "--bogus", NULL, NULL, "unknown option '--bogus'" },
		{ "--credit", "x", NULL, "--credits: 'x' is not a number in 1..4096" },   /* abbreviation */
		{ "--credits", "0", NULL, "--credits: '0' is not a number in 1..4096" },
		{ "--credits", NULL, NULL, "--credits needs a value" },
		{ "--frame-timeout", "500ms", NULL, "not a duration in 1s..1h" },
		{ "--frame-timeout", "5 s", NULL, "e.g. 500ms, 30s, 2m" },
		{ "--size", "65M", NULL, "--size: '65M' is not a size in 1..64M" },
		{ "--size", "4X", NULL, "is not a size (4096, 64K, 4M, 1G)" },
		{ "--mode", "maybe", NULL, "'maybe' is not auto, on or off" },
		{ "--json=yes", NULL, NULL, "--json takes no value" },
		{ "--manifest", "", NULL, "--manifest: empty value" },
		{ "--frame-timeot", "3", NULL, "did you mean --frame-timeout?" },
		{ "a", "b", "c", "unexpected argument 'c'" },
		{ "-x", NULL, NULL, "unknown option '-x'" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run r;
		char out[4096];
		int rc = parse(&r, out, sizeof(out), 2, cases[i][0], cases[i][1], cases[i][2], NULL);
		if (rc != 2 || lines(out) != 1 || !strstr(out, cases[i][3]) ||
		    !strstr(out, "try 'prog --help'") || strncmp(out, "prog: ", 6))
			fail_msg("%s %s: rc %d, output '%s' (want 2, one line with '%s')", cases[i][0],
				 cases[i][1] ? cases[i][1] : "", rc, out, cases[i][3]);
	}
}

static void help_and_version(void **state)
{
	(void)state;
	struct run r;
	char out[8192];

	assert_int_equal(parse(&r, out, sizeof(out), 1, "--help", "--bogus", NULL), 1);
	assert_non_null(strstr(out, "Usage: prog [options] [FILE...]\na test program\n"));
	assert_non_null(strstr(out, "--credits N"));
	assert_non_null(strstr(out, "(default 8)"));
	assert_non_null(strstr(out, "(default 1m)"));       /* a duration's default, with its unit */
	assert_non_null(strstr(out, "(default 4M)"));
	assert_non_null(strstr(out, "--mode auto|on|off"));
	assert_non_null(strstr(out, "Old spellings"));
	assert_non_null(strstr(out, "--frame-timeout-ms N"));
	assert_non_null(strstr(out, "Exit status:\n  0  ok\n  1  runtime failure\n  2  usage error\n"));
	assert_int_equal(parse(&r, out, sizeof(out), 1, "--version", NULL), 1);
	assert_non_null(strstr(out, "prog (h3000 ingest) " ING_VERSION "\n"));
	/* the usage error never prints the help */
	assert_int_equal(parse(&r, out, sizeof(out), 2, "--bogus", NULL), 2);
	assert_null(strstr(out, "Usage:"));
}

static void config_keys(void **state)
{
	(void)state;
	char path[] = "/tmp/ing-test-cli-XXXXXX", text[4096], out[1024];
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const char *conf = "# comment\ncredits = 32\nframe-timeout-ms = 2500\nmode = off\n";
	assert_int_equal(write(fd, conf, strlen(conf)), (ssize_t)strlen(conf));
	close(fd);
	struct cfg c;
	cfg_init(&c);
	assert_int_equal(ing_cli_read_config(&cli, path, text, sizeof(text), &c), 0);
	assert_int_equal(c.credits, 32);
	assert_int_equal(c.timeout_ms, 2500);
	assert_int_equal(c.mode, 0);
	/* a typo in a key: the line, the key and the name it probably meant */
	fd = open(path, O_WRONLY | O_TRUNC);
	conf = "credits = 2\ncredts = 4\n";
	assert_int_equal(write(fd, conf, strlen(conf)), (ssize_t)strlen(conf));
	close(fd);
	FILE *tmp = tmpfile();
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	int rc = ing_cli_read_config(&cli, path, text, sizeof(text), &c);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	size_t n = fread(out, 1, sizeof(out) - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
	unlink(path);
	assert_int_equal(rc, 2);
	assert_non_null(strstr(out, ":2: unknown key 'credts' (did you mean credits?)"));
}

/* ing_cli_read_config of text into c (defaults first); stderr into out; the return value */
static int read_conf(const char *text, struct cfg *c, char *out, size_t cap)
{
	char path[] = "/tmp/ing-test-cli-XXXXXX";
	static char buf[4096];
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	cfg_init(c);
	FILE *tmp = tmpfile();
	fflush(stderr);
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	int rc = ing_cli_read_config(&cli, path, buf, sizeof(buf), c);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	size_t n = fread(out, 1, cap - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
	unlink(path);
	return rc;
}

/* what operators write in config files, and the mistakes they make there */
static void config_operator(void **state)
{
	(void)state;
	struct cfg c;
	char out[1024];

	/* a compound duration is checked against the range like any other */
	assert_int_equal(read_conf("frame-timeout = 2h30m\n", &c, out, sizeof(out)), 2);
	assert_non_null(strstr(out, ":1: frame-timeout: '2h30m' is not a duration in 1s..1h"));
	assert_int_equal(read_conf("frame-timeout = 1m30s # per frame\ncredits = 16 # x\njson\n"
				   "manifest = /tmp/m#1\n", &c, out, sizeof(out)), 0);
	assert_int_equal(c.timeout_ms, 90000);
	assert_int_equal(c.credits, 16);
	assert_true(c.json);
	assert_string_equal(c.path, "/tmp/m#1");
	/* a bare boolean key is true; true/false words too */
	assert_int_equal(read_conf("json = false\n", &c, out, sizeof(out)), 0);
	assert_false(c.json);
	assert_int_equal(read_conf("json = yes\n", &c, out, sizeof(out)), 0);
	assert_true(c.json);
	assert_int_equal(read_conf("json = maybe\n", &c, out, sizeof(out)), 2);
	assert_non_null(strstr(out, ":1: json: 'maybe' is not true or false"));
	/* a key that needs a value, given bare */
	assert_int_equal(read_conf("\ncredits\n", &c, out, sizeof(out)), 2);
	assert_non_null(strstr(out, ":2: credits: needs a value: 'credits = N'"));
	assert_int_equal(read_conf("mode\n", &c, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "'mode = auto|on|off'"));
	/* a key given twice: both lines named, nothing taken silently */
	assert_int_equal(read_conf("credits = 2\n# x\nserver = a:1\ncredits = 4\n", &c, out,
				   sizeof(out)), 2);
	assert_non_null(strstr(out, ":4: credits: already set on line 1: keep one of the two lines"));
	assert_int_equal(lines(out), 1);
	/* an old spelling and its new name are one setting */
	assert_int_equal(read_conf("frame-timeout = 2s\nframe-timeout-ms = 2500\n", &c, out,
				   sizeof(out)), 2);
	assert_non_null(strstr(out, ":2: frame-timeout-ms: already set on line 1 (frame-timeout is "
			       "the same setting)"));
}

/* --help in sections (ING_OPT_GROUP_), and a bash completion made from the same table */
static const struct ing_opt gopts[] = {
	ING_OPT_GROUP_("Connection"),
	ING_OPT_STR_(C, "server", server, "ADDR", "the node"),
	ING_OPT_PATH_(C, "manifest", path, "FILE", "write a manifest"),
	ING_OPT_GROUP_("Frames"),
	ING_OPT_UINT_(C, "credits", credits, 1, 4096, "frames in flight"),
	ING_OPT_CHOICE_(C, "mode", mode, "auto=-1|on=1|off=0", "the mode"),
	ING_OPT_BOOL_(C, "json", json, "JSON summary"),
	ING_OPT_MS_ALIAS_(C, "frame-timeout-ms", timeout_ms, 1000, 3600000, "credits"),
};
static const struct ing_cli gcli = {
	.prog = "gprog", .synopsis = "[options] check|fix", .summary = "a grouped program",
	.opts = gopts, .nopts = sizeof(gopts) / sizeof(gopts[0]), .max_args = 1,
	.init = cfg_init, .cfg_size = sizeof(struct cfg), .commands = "check fix",
};

static int do_gparse(void *arg)
{
	struct run *r = arg;
	cfg_init(&r->c);
	return ing_cli_parse(&gcli, r->argc, r->argv, &r->c, &r->argi);
}

static void groups_and_completion(void **state)
{
	(void)state;
	static char *argv[4] = { "gprog", "--help", NULL, NULL };
	struct run r = { .argv = argv, .argc = 2 };
	char out[8192];

	assert_int_equal(captured(1, out, sizeof(out), do_gparse, &r), 1);
	const char *opt = strstr(out, "\nOptions:\nConnection:\n  --server ADDR"),
		   *frames = strstr(out, "\n\nFrames:\n  --credits N"),
		   *help = strstr(out, "\n\nHelp:\n  -h, --help");
	assert_non_null(opt);
	assert_non_null(frames);
	assert_non_null(help);
	assert_true(opt < frames && frames < help);
	/* a group is no option: not a flag, not a config key, not a suggestion */
	argv[1] = "--Frames";
	assert_int_equal(captured(2, out, sizeof(out), do_gparse, &r), 2);
	assert_null(ing_cli_find(&gcli, "Frames"));

	argv[1] = "--completion";
	argv[2] = "bash";
	r.argc = 3;
	assert_int_equal(captured(1, out, sizeof(out), do_gparse, &r), 1);
	assert_non_null(strstr(out, "_gprog()"));
	assert_non_null(strstr(out, "complete -o bashdefault -o default -F _gprog gprog\n"));
	assert_non_null(strstr(out, "'--server --manifest --credits --mode --json --help --version "
				    "--completion'"));
	assert_null(strstr(out, "--frame-timeout-ms "));   /* old spellings are not offered */
	assert_non_null(strstr(out, "--mode) COMPREPLY=($(compgen -W 'auto on off'"));
	assert_non_null(strstr(out, "--manifest) compopt -o filenames"));
	assert_non_null(strstr(out, "compgen -W 'check fix'"));
	argv[2] = "zsh";
	assert_int_equal(captured(2, out, sizeof(out), do_gparse, &r), 2);
	assert_non_null(strstr(out, "gprog: --completion: 'zsh' is not a shell this program knows: bash; "
				    "try 'gprog --help'\n"));
}

/* the --config first pass leaves argv as given: the full parse reports what was typed */
static int do_two_pass(void *arg)
{
	struct run *r = arg;
	static const char *const first[] = { "manifest", NULL };
	cfg_init(&r->c);
	assert_int_equal(ing_cli_parse_only(&cli, r->argc, r->argv, &r->c, first), 0);
	assert_string_equal(r->argv[1], "check");   /* not moved behind the flags */
	assert_string_equal(r->c.path, "m");
	return ing_cli_parse(&cli, r->argc, r->argv, &r->c, &r->argi);
}

static void first_pass_keeps_argv(void **state)
{
	(void)state;
	char *argv[] = { "prog", "check", "--manifest", "m", "--server", NULL };
	struct run r = { .argv = argv, .argc = 5 };
	char out[1024];
	assert_int_equal(captured(2, out, sizeof(out), do_two_pass, &r), 2);
	assert_non_null(strstr(out, "--server needs a value"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(durations), cmocka_unit_test(size_lists), cmocka_unit_test(good_flags),
		cmocka_unit_test(bad_flags), cmocka_unit_test(help_and_version),
		cmocka_unit_test(config_keys), cmocka_unit_test(config_operator),
		cmocka_unit_test(groups_and_completion), cmocka_unit_test(first_pass_keeps_argv),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
