/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli.h - one way for every program to behave on its command line. A program describes its
 * options once, in a table of struct ing_opt, and this file turns the table into getopt_long
 * parsing, the --help text, config-file keys (common/conf.h) and usage errors:
 *
 *  - --help prints the help on stdout and exits 0; --version prints "PROG (h3000 ingest)
 *    VERSION" and exits 0;
 *  - an unknown flag, a missing or bad value, an unexpected argument: ONE line on stderr,
 *    "PROG: --flag: what is wrong and the fix; try 'PROG --help'", exit status 2;
 *  - durations carry units ("500ms", "30s", "2m", "1h", "2h30m"); a bare number keeps the
 *    meaning the flag always had: seconds on a name without a unit, milliseconds on an old
 *    "-ms" name;
 *  - config files (common/conf.h): `key = value  # comment`, a bare `key` for a flag without
 *    a value (or with an optional one: `drain`), `key = true|false|on|off|yes|no|1|0` for a
 *    flag without a value; a key given twice is refused, naming both lines;
 *  - --help prints the options in the sections the table's ING_OPT_GROUP_ entries open;
 *    --completion bash prints a bash completion script made from the table (flags, the
 *    choices of CHOICE flags, files for PATH flags, the words of .commands);
 *  - sizes are "4096", "64K", "4M", "1G"; a size list (every --sizes) is "4M,16M" or
 *    "1M-16M" or both mixed (common/parse.h, ing_parse_sizes);
 *  - exit status: 0 success, 1 runtime failure, 2 usage error (ING_EXIT_*); a program adds
 *    its own codes above 2 (ingestd: 3, stopped with frames not drained) and documents them
 *    in the exit text of its struct ing_cli, printed by --help and in its man page.
 *
 * Single-threaded: call from main. No allocation.
 */
#ifndef ING_COMMON_CLI_H
#define ING_COMMON_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { ING_EXIT_OK = 0, ING_EXIT_FAILURE = 1, ING_EXIT_USAGE = 2 };

enum ing_opt_type {
	ING_OPT_BOOL,      /* no value: sets a bool to true */
	ING_OPT_STR,       /* const char *; "" stays "" (ING_OPTF_EMPTY_NULL: NULL) */
	ING_OPT_PATH,      /* const char *, not empty */
	ING_OPT_UINT,      /* unsigned in lo..hi */
	ING_OPT_U64,       /* uint64_t in lo..hi */
	ING_OPT_SIZE,      /* uint64_t bytes (4M), lo..hi (hi 0: no limit) */
	ING_OPT_DURATION,  /* unsigned milliseconds in lo..hi; a bare number counts unit_ms */
	ING_OPT_CHOICE,    /* int: one of choices "name=value|name=value|..." */
	ING_OPT_CUSTOM,    /* set() does it */
	ING_OPT_GROUP,     /* not an option: the options after it, to the next one, form a section
			    * of --help (and of the man page) titled help; ING_OPT_GROUP_ */
};

struct ing_opt;
/*
 * A setter: parse v (NULL for a flag given without its optional value) into the field of
 * cfg. 0, or -EINVAL with the reason and fix in why (without the flag's name: the caller
 * prefixes "--name: " or "FILE:LINE: name: ").
 */
typedef int (*ing_opt_set_fn)(const struct ing_opt *d, void *cfg, const char *v, char *why,
			      size_t whylen);

#define ING_OPTF_OPTIONAL 1u   /* the value may be left out (--drain, --drain=off) */
#define ING_OPTF_NOCONF 2u     /* command line only (not a config-file key) */
#define ING_OPTF_EMPTY_NULL 8u /* STR: "" means unset (NULL), e.g. a config file's "name =" */

struct ing_opt {
	const char *name;      /* long flag without "--"; the config-file key */
	const char *arg;       /* metavar in --help; NULL: the flag takes no value */
	enum ing_opt_type type;
	size_t off;            /* the field of the program's config struct */
	uint64_t lo, hi;       /* UINT/U64/SIZE: range; DURATION: range in ms */
	unsigned unit_ms;      /* DURATION: what a bare number counts (1000: s, 1: ms) */
	const char *choices;   /* CHOICE: "auto=-1|on=1|off=0"; CUSTOM: the words its setter
				* takes, for shell completion only, or NULL */
	ing_opt_set_fn set;    /* CUSTOM */
	const char *help;      /* '\n' continues on the next line; NULL: an old spelling */
	const char *alias_of;  /* an old spelling: the flag that replaces it */
	unsigned flags;        /* ING_OPTF_* */
};

/*
 * Table helpers: C is the config struct type. Each checks at compile time that the field
 * has the type its setter writes.
 */
#define ING_OPT_FIELD(C, f, T) \
	(offsetof(C, f) + 0 * sizeof(char[_Generic(((C *)0)->f, T: 1)]))
#define ING_OPT_BOOL_(C, name, f, help) \
	{ name, NULL, ING_OPT_BOOL, ING_OPT_FIELD(C, f, bool), 0, 0, 0, NULL, NULL, help, NULL, 0 }
#define ING_OPT_STR_(C, name, f, arg, help) \
	{ name, arg, ING_OPT_STR, ING_OPT_FIELD(C, f, const char *), 0, 0, 0, NULL, NULL, help, NULL, 0 }
#define ING_OPT_PATH_(C, name, f, arg, help) \
	{ name, arg, ING_OPT_PATH, ING_OPT_FIELD(C, f, const char *), 0, 0, 0, NULL, NULL, help, NULL, 0 }
#define ING_OPT_UINT_(C, name, f, lo, hi, help) \
	{ name, "N", ING_OPT_UINT, ING_OPT_FIELD(C, f, unsigned), lo, hi, 0, NULL, NULL, help, NULL, 0 }
#define ING_OPT_U64_(C, name, f, lo, hi, help) \
	{ name, "N", ING_OPT_U64, ING_OPT_FIELD(C, f, uint64_t), lo, hi, 0, NULL, NULL, help, NULL, 0 }
#define ING_OPT_SIZE_(C, name, f, lo, hi, help) \
	{ name, "SIZE", ING_OPT_SIZE, ING_OPT_FIELD(C, f, uint64_t), lo, hi, 0, NULL, NULL, help, NULL, 0 }
/* a duration; a bare number is seconds (names without a unit) */
#define ING_OPT_DURATION_(C, name, f, lo_ms, hi_ms, help) \
	{ name, "DURATION", ING_OPT_DURATION, ING_OPT_FIELD(C, f, unsigned), lo_ms, hi_ms, 1000, NULL, NULL, help, NULL, 0 }
/* an old spelling "NAME-ms N" of a duration: a bare number is milliseconds (units work too) */
#define ING_OPT_MS_ALIAS_(C, name, f, lo_ms, hi_ms, canonical) \
	{ name, "N", ING_OPT_DURATION, ING_OPT_FIELD(C, f, unsigned), lo_ms, hi_ms, 1, NULL, NULL, NULL, canonical, 0 }
#define ING_OPT_CHOICE_(C, name, f, choices, help) \
	{ name, NULL, ING_OPT_CHOICE, ING_OPT_FIELD(C, f, int), 0, 0, 0, choices, NULL, help, NULL, 0 }
/* opens a section of --help titled title ("Connection"); the options below belong to it */
#define ING_OPT_GROUP_(title) \
	{ NULL, NULL, ING_OPT_GROUP, 0, 0, 0, 0, NULL, NULL, title, NULL, 0 }
/* a setter of its own, which names the field itself */
#define ING_OPT_CUSTOM_(C, name, f, set, arg, help) \
	{ name, arg, ING_OPT_CUSTOM, offsetof(C, f), 0, 0, 0, NULL, set, help, NULL, 0 }

struct ing_cli {
	const char *prog;        /* "ingest-send" */
	const char *synopsis;    /* after the program name: "[options] [FILE...]" */
	const char *summary;     /* one line: what it is (the man page's NAME) */
	const char *about;       /* more lines under the summary, or NULL */
	const struct ing_opt *opts;
	unsigned nopts;
	unsigned max_args;       /* positional arguments allowed (UINT32_MAX: any number) */
	void (*init)(void *cfg); /* fills a config struct with the defaults (--help shows them) */
	size_t cfg_size;         /* its size (at most 8 KiB), with init */
	const char *notes;       /* after the options: details, examples; or NULL */
	const char *exit_status; /* one "  N  meaning" line per code, '\n'-terminated */
	const char *commands;    /* the words a first argument may be ("check rebuild"), for
				  * shell completion; or NULL */
};

/*
 * Parse argv into cfg (defaults already in it). Returns 0 with *argi the index of the first
 * positional argument; 1 after printing --help, --version or --completion (exit 0); 2 after printing one
 * usage line (exit 2). Options are applied in command-line order.
 */
int ing_cli_parse(const struct ing_cli *c, int argc, char **argv, void *cfg, int *argi);
/*
 * Apply only the options named in only (NULL-terminated list of names), ignoring every
 * other flag and error (the full parse reports those): a first pass for --config FILE, so
 * that the file is read before the flags that override it. 1 when --help, --version or
 * --completion was given (not printed), else 0.
 */
int ing_cli_parse_only(const struct ing_cli *c, int argc, char **argv, void *cfg,
		       const char *const *only);
/* The option called name (or an old spelling of it), or NULL. */
const struct ing_opt *ing_cli_find(const struct ing_cli *c, const char *name);
/* Apply one value to cfg (config files): 0 or -EINVAL with why. */
int ing_cli_set(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen);
/*
 * Read a config file ("name = value" lines, common/conf.h) whose names are c's options,
 * into cfg. The file's text is kept in buf (values point into it). 0, or 2 after one line
 * "PROG: FILE:LINE: name: reason" (or "PROG: --config: 'FILE': reason") on stderr.
 */
int ing_cli_read_config(const struct ing_cli *c, const char *path, char *buf, size_t cap,
			void *cfg);

/*
 * The value of option d in cfg as its flag or config key takes it back ("30s", "4M", "on",
 * the string): 0; -ENOENT when unset (a NULL string, a CHOICE value without a name);
 * -ENOTSUP for ING_OPT_CUSTOM (its program renders those: ingestd --print-config).
 */
int ing_cli_value(const struct ing_opt *d, const void *cfg, char *buf, size_t len);

/* The help: usage, summary, options (with the defaults of c->init), notes, exit status. */
void ing_cli_help(const struct ing_cli *c, FILE *f);
/*
 * A bash completion script for c's program, made from its table: every flag, the choices of
 * CHOICE flags (and of CUSTOM ones that list choices), files for PATH flags and for FILE/PEM
 * metavars, directories for a DIR metavar, c->commands as the first argument.
 */
void ing_cli_completion_bash(const struct ing_cli *c, FILE *f);
/* "PROG (h3000 ingest) VERSION" and a copyright line. */
void ing_cli_version(const struct ing_cli *c, FILE *f);
/*
 * A usage error found after parsing (two flags that conflict, a missing argument): prints
 * "PROG: <message>; try 'PROG --help'" as one line on stderr and returns 2 (ING_EXIT_USAGE).
 */
int ing_cli_usage_error(const struct ing_cli *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Where usage and config-file errors go (NULL: stderr, the default); returns the previous
 * sink. ingestd's reload (SIGHUP) parses its file again with an open_memstream here, so
 * that the one line lands in its log instead of a terminal long gone.
 */
FILE *ing_cli_set_errors(FILE *f);

/* Setters for CUSTOM options that several programs have. */
/* A cpu or NUMA node number 0..65535 into an int field (-1 until set). */
int ing_opt_set_index(const struct ing_opt *d, void *cfg, const char *v, char *why,
		      size_t whylen);
/*
 * A node's address HOST:PORT or [V6]:PORT (host not empty, port 1..65535) into a const
 * char * field; with d->flags & ING_OPTF_LIST, a comma-separated list of them (--servers).
 */
int ing_opt_set_hostport(const struct ing_opt *d, void *cfg, const char *v, char *why,
			 size_t whylen);
#define ING_OPTF_LIST 4u
/*
 * The address a client on this host dials for a node that listens on listen (ingestd's
 * --listen, HOST:PORT): a wildcard host (0.0.0.0, [::] or none) becomes loopback, any other
 * stays. 0, or -EINVAL when listen has no port.
 */
int ing_cli_local_target(const char *listen, char *buf, size_t len);
/* --log-level err|warn|info|debug: sets the process's log level at once (no field). */
int ing_opt_set_log_level(const struct ing_opt *d, void *cfg, const char *v, char *why,
			  size_t whylen);
#define ING_OPT_LOG_LEVEL_ENTRY(C, dflt_help) \
	{ "log-level", "LEVEL", ING_OPT_CUSTOM, 0, 0, 0, 0, "err=0|warn=1|info=2|debug=3", ing_opt_set_log_level, \
	  "err|warn|info|debug (default " dflt_help ", or $ING_LOG_LEVEL)", NULL, ING_OPTF_NOCONF }

#endif
