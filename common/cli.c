/* SPDX-License-Identifier: Apache-2.0 */
#include "common/cli.h"
#include "common/conf.h"
#include "common/log.h"
#include "common/parse.h"

#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ING_CLI_MAX_OPTS 128
#define HELP_COL 25   /* the column the option descriptions start in */

#define FIELD(cfg, d, type) ((type *)(void *)((char *)(cfg) + (d)->off))

/* getopt's has_arg of an option */
static int has_arg(const struct ing_opt *d)
{
	return d->flags & ING_OPTF_OPTIONAL ? optional_argument
	       : d->type == ING_OPT_BOOL || (!d->arg && d->type != ING_OPT_CHOICE) ? no_argument
	       : required_argument;
}

/* ---------------------------------------------------------------- setting a value */

/* CHOICE: the value of name in "a=1|b=2", or -EINVAL */
static int choice_value(const char *choices, const char *name, int *out)
{
	size_t nl = strlen(name);
	for (const char *p = choices; *p;) {
		const char *eq = strchr(p, '='), *bar = strchr(p, '|');
		if (!eq)
			break;
		if ((size_t)(eq - p) == nl && !strncasecmp(p, name, nl)) {
			*out = atoi(eq + 1);
			return 0;
		}
		if (!bar)
			break;
		p = bar + 1;
	}
	return -EINVAL;
}

/* CHOICE: "a, b or c" (sep ", " and " or "), or "a|b|c" (sep "|") into buf */
static const char *choice_names(const char *choices, bool prose, char *buf, size_t len)
{
	size_t o = 0;
	unsigned n = 0, total = 0;
	for (const char *p = choices; *p; p++)
		total += *p == '=';
	buf[0] = '\0';
	for (const char *p = choices; *p && o + 1 < len;) {
		const char *eq = strchr(p, '='), *bar = strchr(p, '|');
		if (!eq)
			break;
		const char *sep = !n ? "" : !prose ? "|" : n + 1 == total ? " or " : ", ";
		o += (size_t)snprintf(buf + o, len - o, "%s%.*s", sep, (int)(eq - p), p);
		n++;
		if (!bar || o >= len)
			break;
		p = bar + 1;
	}
	return buf;
}

/* CHOICE: the name whose value is v, or NULL */
static const char *choice_name(const char *choices, int v, char *buf, size_t len)
{
	for (const char *p = choices; *p;) {
		const char *eq = strchr(p, '='), *bar = strchr(p, '|');
		if (!eq)
			break;
		if (atoi(eq + 1) == v) {
			snprintf(buf, len, "%.*s", (int)(eq - p), p);
			return buf;
		}
		if (!bar)
			break;
		p = bar + 1;
	}
	return NULL;
}

#define fmt_size ing_fmt_size

/* true|false|on|off|yes|no|1|0: 0, or -EINVAL */
static int parse_bool(const char *v, bool *out)
{
	static const char *const t[] = { "true", "on", "yes", "1" }, *const f[] = { "false", "off", "no", "0" };
	for (unsigned i = 0; i < 4; i++) {
		if (!strcasecmp(v, t[i]) || !strcasecmp(v, f[i])) {
			*out = !strcasecmp(v, t[i]);
			return 0;
		}
	}
	return -EINVAL;
}

int ing_cli_set(const struct ing_opt *d, void *cfg, const char *v, char *why, size_t whylen)
{
	uint64_t x;
	char a[32], b[32], names[160];

	if (!v && d->type != ING_OPT_BOOL && d->type != ING_OPT_CUSTOM) {
		snprintf(why, whylen, "needs a value");
		return -EINVAL;
	}
	switch (d->type) {
	case ING_OPT_BOOL: {
		bool on;
		if (v && parse_bool(v, &on)) {
			snprintf(why, whylen, "'%.64s' is not true or false (on/off, yes/no, 1/0; a bare "
				 "key is true)", v);
			return -EINVAL;
		}
		*FIELD(cfg, d, bool) = v ? on : true;
		return 0;
	}
	case ING_OPT_GROUP:
		break;
	case ING_OPT_STR:
		*FIELD(cfg, d, const char *) = *v || !(d->flags & ING_OPTF_EMPTY_NULL) ? v : NULL;
		return 0;
	case ING_OPT_PATH:
		if (!*v) {
			snprintf(why, whylen, "empty value: give a %s", d->arg ? d->arg : "path");
			return -EINVAL;
		}
		*FIELD(cfg, d, const char *) = v;
		return 0;
	case ING_OPT_UINT:
	case ING_OPT_U64:
		if (ing_parse_u64(v, d->hi, &x) || x < d->lo) {
			snprintf(why, whylen, "'%.64s' is not a number in %" PRIu64 "..%" PRIu64, v, d->lo,
				 d->hi);
			return -EINVAL;
		}
		if (d->type == ING_OPT_UINT)
			*FIELD(cfg, d, unsigned) = (unsigned)x;
		else
			*FIELD(cfg, d, uint64_t) = x;
		return 0;
	case ING_OPT_SIZE:
		if (ing_parse_size(v, &x)) {
			snprintf(why, whylen, "'%.64s' is not a size (4096, 64K, 4M, 1G)", v);
			return -EINVAL;
		}
		if (x < d->lo || (d->hi && x > d->hi)) {
			if (d->hi)
				snprintf(why, whylen, "'%.64s' is not a size in %s..%s", v,
					 fmt_size(d->lo, a, sizeof(a)), fmt_size(d->hi, b, sizeof(b)));
			else
				snprintf(why, whylen, "'%.64s': the size must be at least %s", v,
					 fmt_size(d->lo, a, sizeof(a)));
			return -EINVAL;
		}
		*FIELD(cfg, d, uint64_t) = x;
		return 0;
	case ING_OPT_DURATION: {
		int rc = ing_parse_duration_ms(v, d->unit_ms, d->hi, &x);
		if (rc || x < d->lo) {
			snprintf(why, whylen, "'%.64s' is not a duration in %s..%s (e.g. 500ms, 30s, 2m; a "
				 "bare number is %s)", v, ing_fmt_duration(d->lo, a, sizeof(a)),
				 ing_fmt_duration(d->hi, b, sizeof(b)),
				 d->unit_ms == 1 ? "milliseconds" : "seconds");
			return -EINVAL;
		}
		*FIELD(cfg, d, unsigned) = (unsigned)x;
		return 0;
	}
	case ING_OPT_CHOICE: {
		int val;
		if (choice_value(d->choices, v, &val)) {
			snprintf(why, whylen, "'%.64s' is not %s", v,
				 choice_names(d->choices, true, names, sizeof(names)));
			return -EINVAL;
		}
		*FIELD(cfg, d, int) = val;
		return 0;
	}
	case ING_OPT_CUSTOM:
		return d->set(d, cfg, v, why, whylen);
	}
	snprintf(why, whylen, "unknown option type");
	return -EINVAL;
}

int ing_opt_set_index(const struct ing_opt *d, void *cfg, const char *v, char *why,
		      size_t whylen)
{
	uint64_t x;
	if (!v || ing_parse_u64(v, 65535, &x)) {
		snprintf(why, whylen, "'%.64s' is not a cpu or node number (0..65535)", v ? v : "");
		return -EINVAL;
	}
	*FIELD(cfg, d, int) = (int)x;
	return 0;
}

/* one HOST:PORT of [s, s + n): NULL, or what is wrong with it */
static const char *hostport_why(const char *s, size_t n)
{
	const char *end = s + n, *port;
	if (n && s[0] == '[') {
		const char *rb = memchr(s, ']', n);
		if (!rb || rb == s + 1 || rb + 1 == end || rb[1] != ':')
			return "is not [V6]:PORT";
		port = rb + 2;
	} else {
		const char *colon = NULL;
		for (const char *p = s; p < end; p++)
			if (*p == ':')
				colon = p;
		if (!colon)
			return "has no :PORT (the node listens on 50051 by default: HOST:50051)";
		if (colon == s)
			return "has no host";
		port = colon + 1;
	}
	size_t pl = (size_t)(end - port);
	unsigned long v = 0;
	if (!pl || pl > 5)
		return "has no valid port (1..65535)";
	for (const char *p = port; p < end; p++) {
		if (*p < '0' || *p > '9')
			return "has no valid port (1..65535)";
		v = v * 10 + (unsigned long)(*p - '0');
	}
	return v >= 1 && v <= 65535 ? NULL : "has no valid port (1..65535)";
}

int ing_opt_set_hostport(const struct ing_opt *d, void *cfg, const char *v, char *why,
			 size_t whylen)
{
	const char *p = v;
	if (!v || !*v) {
		snprintf(why, whylen, "empty value: give HOST:PORT");
		return -EINVAL;
	}
	for (;;) {
		const char *comma = (d->flags & ING_OPTF_LIST) ? strchr(p, ',') : NULL;
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		const char *w = hostport_why(p, n);
		if (w) {
			snprintf(why, whylen, "'%.*s' %s", (int)(n > 128 ? 128 : n), p, w);
			return -EINVAL;
		}
		if (!comma)
			break;
		p = comma + 1;
	}
	*FIELD(cfg, d, const char *) = v;
	return 0;
}

int ing_cli_local_target(const char *listen, char *buf, size_t len)
{
	const char *port = strrchr(listen, ':');
	size_t hl = port ? (size_t)(port - listen) : 0;
	if (!port || !port[1])
		return -EINVAL;
	if (hl == 0 || (hl == 7 && !strncmp(listen, "0.0.0.0", 7)))
		snprintf(buf, len, "127.0.0.1%s", port);
	else if (hl == 4 && !strncmp(listen, "[::]", 4))
		snprintf(buf, len, "[::1]%s", port);
	else
		snprintf(buf, len, "%s", listen);
	return 0;
}

int ing_opt_set_log_level(const struct ing_opt *d, void *cfg, const char *v, char *why,
			  size_t whylen)
{
	enum ing_log_level l;
	(void)d;
	(void)cfg;
	if (!v || ing_log_parse_level(v, &l)) {
		snprintf(why, whylen, "'%.64s' is not err, warn, info or debug", v ? v : "");
		return -EINVAL;
	}
	ing_log_set_level(l);
	return 0;
}

/* ---------------------------------------------------------------- messages */

static FILE *err_sink;   /* NULL: stderr (ing_cli_set_errors) */

FILE *ing_cli_set_errors(FILE *f)
{
	FILE *old = err_sink;
	err_sink = f;
	return old;
}

static FILE *err_out(void)
{
	return err_sink ? err_sink : stderr;
}

int ing_cli_usage_error(const struct ing_cli *c, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* one line, whatever the message holds */
	for (char *p = msg; *p; p++)
		if (*p == '\n')
			*p = ' ';
	fprintf(err_out(), "%s: %s; try '%s --help'\n", c->prog, msg, c->prog);
	return ING_EXIT_USAGE;
}

void ing_cli_version(const struct ing_cli *c, FILE *f)
{
	fprintf(f, "%s (h3000 ingest) %s\n"
		   "Copyright 2026 the h3000 ingest authors. License Apache-2.0.\n",
		c->prog, ING_VERSION);
}

/* one option's head: "  --name ARG", "  --name[=on|off]" */
static int opt_head(const struct ing_opt *d, char *buf, size_t len)
{
	char names[160];
	const char *arg = d->arg;
	if (d->type == ING_OPT_CHOICE && !arg)
		arg = choice_names(d->choices, false, names, sizeof(names));
	if (!arg)
		return snprintf(buf, len, "  --%s", d->name);
	if (d->flags & ING_OPTF_OPTIONAL)
		return snprintf(buf, len, "  --%s%s", d->name, arg);
	return snprintf(buf, len, "  --%s %s", d->name, arg);
}

static void help_text(FILE *f, const char *h)
{
	for (; *h; h++) {
		fputc(*h, f);
		if (*h == '\n')
			fprintf(f, "%*s", HELP_COL, "");
	}
}

int ing_cli_value(const struct ing_opt *d, const void *cfg, char *buf, size_t len)
{
	const char *str;
	switch (d->type) {
	case ING_OPT_BOOL:
		snprintf(buf, len, "%s", *FIELD(cfg, d, const bool) ? "on" : "off");
		return 0;
	case ING_OPT_STR:
	case ING_OPT_PATH:
		str = *FIELD(cfg, d, const char *const);
		if (!str || (!*str && (d->flags & ING_OPTF_EMPTY_NULL)))
			return -ENOENT;
		snprintf(buf, len, "%s", str);
		return 0;
	case ING_OPT_UINT:
		snprintf(buf, len, "%u", *FIELD(cfg, d, const unsigned));
		return 0;
	case ING_OPT_U64:
		snprintf(buf, len, "%" PRIu64, *FIELD(cfg, d, const uint64_t));
		return 0;
	case ING_OPT_SIZE:
		fmt_size(*FIELD(cfg, d, const uint64_t), buf, len);
		return 0;
	case ING_OPT_DURATION:
		ing_fmt_duration(*FIELD(cfg, d, const unsigned), buf, len);
		return 0;
	case ING_OPT_CHOICE:
		return choice_name(d->choices, *FIELD(cfg, d, const int), buf, len) ? 0 : -ENOENT;
	default:
		return -ENOTSUP;
	}
}

/*
 * " (default X)" from the defaults struct, for options whose help does not say it: on the
 * help's last line when it fits in 80 columns, else on a line of its own.
 */
static void help_default(FILE *f, const struct ing_opt *d, const void *defaults)
{
	char buf[64], v[48];
	if (!defaults || strstr(d->help, "default"))
		return;
	switch (d->type) {
	case ING_OPT_UINT:
	case ING_OPT_U64:
	case ING_OPT_SIZE:
	case ING_OPT_DURATION:
	case ING_OPT_CHOICE:
		if (ing_cli_value(d, defaults, v, sizeof(v)))
			return;
		break;
	default:
		return;
	}
	snprintf(buf, sizeof(buf), " (default %s)", v);
	const char *last = strrchr(d->help, '\n');
	size_t col = HELP_COL + strlen(last ? last + 1 : d->help);
	if (col + strlen(buf) > 80)
		fprintf(f, "\n%*s%s", HELP_COL, "", buf + 1);
	else
		fputs(buf, f);
}

/* one option's lines of --help */
static void help_opt(FILE *f, const struct ing_opt *d, const void *defaults)
{
	char head[192];
	int n = opt_head(d, head, sizeof(head));
	if (n >= HELP_COL - 1)
		fprintf(f, "%s\n%*s", head, HELP_COL, "");
	else
		fprintf(f, "%s%*s", head, HELP_COL - n, "");
	help_text(f, d->help);
	help_default(f, d, defaults);
	fputc('\n', f);
}

void ing_cli_help(const struct ing_cli *c, FILE *f)
{
	static _Alignas(max_align_t) char dflt[8192];
	const void *defaults = NULL;
	char head[192];
	bool durations = false, aliases = false, grouped = c->nopts && c->opts[0].type == ING_OPT_GROUP;

	if (c->init && c->cfg_size <= sizeof(dflt)) {
		memset(dflt, 0, sizeof(dflt));
		c->init(dflt);
		defaults = dflt;
	}
	fprintf(f, "Usage: %s %s\n%s\n", c->prog, c->synopsis, c->summary);
	if (c->about)
		fprintf(f, "\n%s", c->about);
	/* sections (help2man: "Options:" is OPTIONS, each "Title:" a subsection of it) */
	fprintf(f, "\nOptions:\n");
	for (unsigned i = 0; i < c->nopts; i++) {
		const struct ing_opt *d = &c->opts[i];
		if (d->type == ING_OPT_GROUP) {
			fprintf(f, "%s%s:\n", i ? "\n" : "", d->help);
			continue;
		}
		if (!d->help) {
			aliases = true;
			continue;
		}
		durations |= d->type == ING_OPT_DURATION;
		help_opt(f, d, defaults);
	}
	fprintf(f, "%s  -h, --help             this text\n"
		   "  --version              the version\n"
		   "  --completion bash      a bash completion script for this program\n",
		grouped ? "\nHelp:\n" : "");
	if (durations)
		fprintf(f, "\nA DURATION has a unit: 500ms, 30s, 2m, 1h, or parts of them: 2h30m, 1m30s;\n"
			   "a bare number is seconds.\n");
	if (aliases) {
		fprintf(f, "\nOld spellings, still accepted:\n");
		for (unsigned i = 0; i < c->nopts; i++) {
			const struct ing_opt *d = &c->opts[i];
			if (d->help || d->type == ING_OPT_GROUP)
				continue;
			int n = opt_head(d, head, sizeof(head));
			if (n >= HELP_COL - 1)
				fprintf(f, "%s\n%*s", head, HELP_COL, "");
			else
				fprintf(f, "%s%*s", head, HELP_COL - n, "");
			if (d->type == ING_OPT_DURATION && d->unit_ms == 1)
				fprintf(f, "--%s in milliseconds (units work too)\n", d->alias_of);
			else
				fprintf(f, "--%s\n", d->alias_of);
		}
	}
	if (c->notes)
		fprintf(f, "\n%s", c->notes);
	if (c->exit_status)
		fprintf(f, "\nExit status:\n%s", c->exit_status);
}

/* ---------------------------------------------------------------- shell completion */

/* the shell function's name for prog: "_ingest_stat" */
static void completion_fn(const char *prog, char *buf, size_t len)
{
	size_t o = (size_t)snprintf(buf, len, "_");
	for (const char *p = prog; *p && o + 1 < len; p++)
		buf[o++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')
			   ? *p : '_';
	buf[o] = '\0';
}

/* the choices of d as words ("auto on off"), or NULL */
static const char *completion_words(const struct ing_opt *d, char *buf, size_t len)
{
	if (!d->choices)
		return NULL;
	choice_names(d->choices, false, buf, len);
	for (char *p = buf; *p; p++)
		if (*p == '|')
			*p = ' ';
	return buf;
}

void ing_cli_completion_bash(const struct ing_cli *c, FILE *f)
{
	char fn[96], words[256];

	completion_fn(c->prog, fn, sizeof(fn));
	fprintf(f, "# bash completion for %s (h3000 ingest %s), made from its option table\n"
		   "# by '%s --completion bash': regenerate it rather than edit it.\n"
		   "%s()\n{\n"
		   "\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} opt=\n"
		   "\tCOMPREPLY=()\n"
		   "\t# --flag=VALUE: bash splits at '='\n"
		   "\tif [[ $cur == = ]]; then\n\t\topt=$prev; cur=\n"
		   "\telif [[ $prev == = && $COMP_CWORD -ge 2 ]]; then\n"
		   "\t\topt=${COMP_WORDS[COMP_CWORD-2]}\n"
		   "\telse\n\t\tcase $prev in\n\t\t",
		c->prog, ING_VERSION, c->prog, fn);
	/* the flags whose value is the next word */
	unsigned nreq = 0;
	for (unsigned i = 0; i < c->nopts; i++) {
		const struct ing_opt *d = &c->opts[i];
		if (d->type != ING_OPT_GROUP && has_arg(d) == required_argument)
			fprintf(f, "%s--%s", nreq++ ? "|" : "", d->name);
	}
	fprintf(f, "%s--completion) opt=$prev ;;\n\t\tesac\n\tfi\n"
		   "\tcase $opt in\n", nreq ? "|" : "");
	for (unsigned i = 0; i < c->nopts; i++) {
		const struct ing_opt *d = &c->opts[i];
		if (d->type == ING_OPT_GROUP || has_arg(d) == no_argument)
			continue;
		const char *w = completion_words(d, words, sizeof(words));
		const char *arg = d->arg ? d->arg : "";
		if (w)
			fprintf(f, "\t--%s) COMPREPLY=($(compgen -W '%s' -- \"$cur\")); return ;;\n", d->name, w);
		else if (strstr(arg, "DIR"))
			fprintf(f, "\t--%s) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- \"$cur\")); "
				   "return ;;\n", d->name);
		else if (d->type == ING_OPT_PATH || strstr(arg, "FILE") || strstr(arg, "PEM") ||
			 strstr(arg, "PATH"))
			fprintf(f, "\t--%s) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- \"$cur\")); "
				   "return ;;\n", d->name);
		else
			fprintf(f, "\t--%s) return ;;\n", d->name);   /* a value of the user's own */
	}
	fprintf(f, "\t--completion) COMPREPLY=($(compgen -W 'bash' -- \"$cur\")); return ;;\n"
		   "\tesac\n"
		   "\tif [[ $cur == -* ]]; then\n"
		   "\t\tCOMPREPLY=($(compgen -W '");
	for (unsigned i = 0; i < c->nopts; i++) {
		const struct ing_opt *d = &c->opts[i];
		if (d->type == ING_OPT_GROUP || !d->help)
			continue;   /* old spellings still work, but are not offered */
		fprintf(f, "--%s%s ", d->name, has_arg(d) == optional_argument ? "=" : "");
	}
	fprintf(f, "--help --version --completion' -- \"$cur\"))\n"
		   "\t\t[[ ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null\n"
		   "\t\treturn\n\tfi\n");
	if (c->commands) {
		/* the first word that is neither a flag nor a flag's value */
		fprintf(f, "\tlocal i have=\n"
			   "\tfor ((i = 1; i < COMP_CWORD; i++)); do\n"
			   "\t\tcase ${COMP_WORDS[i]} in\n"
			   "\t\t-*|=) ;;\n"
			   "\t\t*) [[ ${COMP_WORDS[i-1]} == = ]] || case ${COMP_WORDS[i-1]} in");
		nreq = 0;
		for (unsigned i = 0; i < c->nopts; i++) {
			const struct ing_opt *d = &c->opts[i];
			if (d->type != ING_OPT_GROUP && has_arg(d) == required_argument)
				fprintf(f, "%s--%s", nreq++ ? "|" : " ", d->name);
		}
		fprintf(f, "%s--completion) ;; *) have=1 ;; esac ;;\n"
			   "\t\tesac\n\tdone\n"
			   "\t[[ $have ]] || COMPREPLY=($(compgen -W '%s' -- \"$cur\"))\n",
			nreq ? "|" : " ", c->commands);
	}
	fprintf(f, "}\ncomplete -o bashdefault -o default -F %s %s\n", fn, c->prog);
}

/* ---------------------------------------------------------------- parsing */

static unsigned edit_distance(const char *a, const char *b)
{
	unsigned row[64], la = (unsigned)strlen(a), lb = (unsigned)strlen(b);
	if (la >= 63 || lb >= 63)
		return 99;
	for (unsigned j = 0; j <= lb; j++)
		row[j] = j;
	for (unsigned i = 1; i <= la; i++) {
		unsigned prev = row[0];
		row[0] = i;
		for (unsigned j = 1; j <= lb; j++) {
			unsigned cur = row[j];
			unsigned sub = prev + (a[i - 1] != b[j - 1]);
			unsigned del = row[j] + 1, ins = row[j - 1] + 1;
			row[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
			prev = cur;
		}
	}
	return row[lb];
}

/* the option closest to an unknown name (a typo), or NULL */
static const struct ing_opt *closest(const struct ing_cli *c, const char *name)
{
	const struct ing_opt *best = NULL;
	unsigned bd = 3;
	char n[64];
	snprintf(n, sizeof(n), "%s", name);
	n[strcspn(n, "=")] = '\0';
	for (unsigned i = 0; i < c->nopts; i++) {
		if (!c->opts[i].name)
			continue;
		unsigned dist = edit_distance(n, c->opts[i].name);
		if (dist < bd) {
			bd = dist;
			best = &c->opts[i];
		}
	}
	return best;
}

const struct ing_opt *ing_cli_find(const struct ing_cli *c, const char *name)
{
	for (unsigned i = 0; i < c->nopts; i++)
		if (c->opts[i].name && !strcmp(c->opts[i].name, name))
			return &c->opts[i];
	return NULL;
}

enum { OPT_HELP = 'h', OPT_VERSION = 1, OPT_COMPLETION = 2, OPT_BASE = 256 };

static struct option *long_opts(const struct ing_cli *c)
{
	static struct option lo[ING_CLI_MAX_OPTS + 4];
	unsigned n = c->nopts < ING_CLI_MAX_OPTS ? c->nopts : ING_CLI_MAX_OPTS, k = 0;
	assert(c->nopts <= ING_CLI_MAX_OPTS);   /* a table this long: raise the limit */
	for (unsigned i = 0; i < n; i++) {
		const struct ing_opt *d = &c->opts[i];
		if (d->type != ING_OPT_GROUP)
			lo[k++] = (struct option){ d->name, has_arg(d), NULL, OPT_BASE + (int)i };
	}
	lo[k] = (struct option){ "help", no_argument, NULL, OPT_HELP };
	lo[k + 1] = (struct option){ "version", no_argument, NULL, OPT_VERSION };
	lo[k + 2] = (struct option){ "completion", required_argument, NULL, OPT_COMPLETION };
	lo[k + 3] = (struct option){ NULL, 0, NULL, 0 };
	return lo;
}

/* the flag as the user typed it, for messages: "--foo" of "--foo=bar" */
static const char *typed(char **argv, int at, char *buf, size_t len)
{
	snprintf(buf, len, "%s", at > 0 ? argv[at] : "?");
	buf[strcspn(buf, "=")] = '\0';
	return buf;
}

static int bad_flag(const struct ing_cli *c, const char *what, const char *flag)
{
	const struct ing_opt *near = flag[0] == '-' && flag[1] == '-' ? closest(c, flag + 2) : NULL;
	if (near)
		return ing_cli_usage_error(c, "%s '%s' (did you mean --%s?)", what, flag, near->name);
	return ing_cli_usage_error(c, "%s '%s'", what, flag);
}

int ing_cli_parse(const struct ing_cli *c, int argc, char **argv, void *cfg, int *argi)
{
	struct option *lo = long_opts(c);
	char why[512], flag[64];
	int o;

	opterr = 0;
	optind = 0;   /* glibc: full re-initialisation (a first pass may have run) */
	while ((o = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		if (o == OPT_HELP) {
			ing_cli_help(c, stdout);
			return 1;
		}
		if (o == OPT_VERSION) {
			ing_cli_version(c, stdout);
			return 1;
		}
		if (o == OPT_COMPLETION) {
			if (strcmp(optarg, "bash"))
				return ing_cli_usage_error(c, "--completion: '%.32s' is not a shell this "
							   "program knows: bash", optarg);
			ing_cli_completion_bash(c, stdout);
			return 1;
		}
		if (o >= OPT_BASE && o < OPT_BASE + (int)c->nopts) {
			const struct ing_opt *d = &c->opts[o - OPT_BASE];
			why[0] = '\0';
			if (ing_cli_set(d, cfg, optarg, why, sizeof(why)))
				return ing_cli_usage_error(c, "--%s: %s", d->name, why);
			continue;
		}
		if (o == ':')
			return ing_cli_usage_error(c, "%s needs a value",
						   typed(argv, optind - 1, flag, sizeof(flag)));
		if (optopt >= OPT_BASE && optopt < OPT_BASE + (int)c->nopts)
			return ing_cli_usage_error(c, "--%s takes no value",
						   c->opts[optopt - OPT_BASE].name);
		if (optopt > 0 && optopt < 128 && argv[optind - 1][1] != '-')
			return ing_cli_usage_error(c, "unknown option '-%c'", optopt);
		return bad_flag(c, "unknown option", typed(argv, optind - 1, flag, sizeof(flag)));
	}
	if ((unsigned)(argc - optind) > c->max_args) {
		if (!c->max_args)
			return ing_cli_usage_error(c, "unexpected argument '%.128s' (this program takes "
						   "options only)", argv[optind]);
		return ing_cli_usage_error(c, "unexpected argument '%.128s' (at most %u)",
					   argv[optind + (int)c->max_args], c->max_args);
	}
	*argi = optind;
	return 0;
}

int ing_cli_parse_only(const struct ing_cli *c, int argc, char **argv, void *cfg,
		       const char *const *only)
{
	struct option *lo = long_opts(c);
	static char *copy[1024];
	char why[256];
	int o, asked = 0;

	/* getopt permutes the vector it parses; the full parse must see argv as given (a
	 * value-less flag at the end would otherwise take a moved argument as its value) */
	if (argc < (int)(sizeof(copy) / sizeof(copy[0]))) {
		memcpy(copy, argv, (size_t)argc * sizeof(*argv));
		copy[argc] = NULL;
		argv = copy;
	}
	opterr = 0;
	optind = 0;
	while ((o = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		if (o == OPT_HELP || o == OPT_VERSION || o == OPT_COMPLETION) {
			asked = 1;
			continue;
		}
		if (o < OPT_BASE || o >= OPT_BASE + (int)c->nopts)
			continue;
		const struct ing_opt *d = &c->opts[o - OPT_BASE];
		for (const char *const *n = only; *n; n++)
			if (!strcmp(*n, d->name))
				(void)ing_cli_set(d, cfg, optarg, why, sizeof(why));
	}
	optind = 0;
	return asked;
}

/* ---------------------------------------------------------------- config files */

struct conf_ctx {
	const struct ing_cli *c;
	void *cfg;
	unsigned line_of[ING_CLI_MAX_OPTS];   /* the line that set each option, 0: none yet */
	char why[400];
};

/* the option an old spelling stands for (its table index), else d's own */
static unsigned canonical(const struct ing_cli *c, const struct ing_opt *d)
{
	const struct ing_opt *to = d->alias_of ? ing_cli_find(c, d->alias_of) : NULL;
	return (unsigned)((to ? to : d) - c->opts);
}

static int conf_setting(void *arg, const char *key, const char *value, unsigned line)
{
	struct conf_ctx *x = arg;
	const struct ing_opt *d = ing_cli_find(x->c, key);
	char why[320] = "";
	if (!d || (d->flags & ING_OPTF_NOCONF)) {
		const struct ing_opt *near = closest(x->c, key);
		snprintf(x->why, sizeof(x->why), "unknown key '%.64s'%s%s%s", key,
			 near ? " (did you mean " : "", near ? near->name : "", near ? "?)" : "");
		return -ENOENT;
	}
	unsigned k = canonical(x->c, d);
	if (k < ING_CLI_MAX_OPTS && x->line_of[k]) {
		bool other = strcmp(key, x->c->opts[k].name) != 0;
		snprintf(x->why, sizeof(x->why), "%s: already set on line %u%s%s%s: keep one of the two "
			 "lines", key, x->line_of[k], other ? " (" : "", other ? x->c->opts[k].name : "",
			 other ? " is the same setting)" : "");
		return -EEXIST;
	}
	if (!value && d->type != ING_OPT_BOOL && !(d->flags & ING_OPTF_OPTIONAL)) {
		char names[160];
		snprintf(x->why, sizeof(x->why), "%s: needs a value: '%s = %s'", key, key,
			 d->type == ING_OPT_CHOICE ? choice_names(d->choices, false, names, sizeof(names))
			 : d->arg ? d->arg : "VALUE");
		return -EINVAL;
	}
	if (ing_cli_set(d, x->cfg, value, why, sizeof(why))) {
		snprintf(x->why, sizeof(x->why), "%s: %s", key, why);
		return -EINVAL;
	}
	if (k < ING_CLI_MAX_OPTS)
		x->line_of[k] = line;
	return 0;
}

int ing_cli_read_config(const struct ing_cli *c, const char *path, char *buf, size_t cap,
			void *cfg)
{
	struct conf_ctx x = { .c = c, .cfg = cfg };
	char why[128] = "";
	unsigned line = 0;
	int rc = ing_conf_read(path, buf, cap, conf_setting, &x, &line, why, sizeof(why));
	if (rc == 0)
		return 0;
	if (line)
		fprintf(err_out(), "%s: %s:%u: %s\n", c->prog, path, line, x.why[0] ? x.why : why);
	else
		fprintf(err_out(), "%s: --config: '%s': %s\n", c->prog, path, why);
	return ING_EXIT_USAGE;
}
