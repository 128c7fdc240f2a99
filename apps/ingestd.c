/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ingestd - the ingest node daemon. A thin main around control/node/node.h: the options
 * (control/node/opts.c, one table for flags and --config keys) into struct
 * ing_ingestd_opts, then ing_node_start, ing_node_wait (start order, SIGINT/SIGTERM drain,
 * teardown, SIGHUP reload). Exit status: 0 clean stop, 1 runtime error, 2 usage or configuration error,
 * 3 stopped with frames not drained (ingestd --help).
 */
#include "common/cli.h"
#include "common/log.h"
#include "control/node/node.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* --check-config: the options and this machine; prints one line, returns the exit status */
static int check_config(const struct ing_ingestd_opts *o)
{
	char why[512], note[512];

	if (ing_ingestd_opts_check_host(o, false, why, sizeof(why), note, sizeof(note))) {
		fprintf(stderr, "ingestd: %s%s%s\n", o->config ? o->config : "",
			o->config ? ": " : "", why);
		return ING_EXIT_USAGE;
	}
	if (note[0])
		fprintf(stderr, "ingestd: warning: %s\n", note);
	printf("ingestd: configuration OK%s%s\n", o->config ? ": " : "", o->config ? o->config : "");
	return ING_EXIT_OK;
}

int main(int argc, char **argv)
{
	struct ing_ingestd_opts o;
	struct ing_node *node;
	int rc;

	/*
	 * Signals go to the node's signalfd: block them first thing, before any thread (EAL,
	 * workers) exists and before start-up has touched the data dir. A SIGTERM during
	 * start-up is then handled once the loop runs (drain, exit 0) instead of killing a
	 * half-started daemon.
	 */
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGUSR2);   /* fleet: toggle DRAINING */
	sigaddset(&ss, SIGHUP);    /* reload the config file (on the control thread) */
	pthread_sigmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);

	ing_ingestd_opts_init(&o);
	rc = ing_ingestd_opts_parse(argc, argv, &o);
	if (rc)
		return rc == 1 ? ING_EXIT_OK : rc;   /* 1: --help or --version */
	if (o.print_only) {
		ing_ingestd_print_config(&o, stdout);
		return fflush(stdout) == 0 ? ING_EXIT_OK : ING_EXIT_FAILURE;
	}
	if (o.check_only)
		return check_config(&o);
	ing_log_set_format(o.log_format);
	if (o.log_level) {
		enum ing_log_level l;
		(void)ing_log_parse_level(o.log_level, &l);
		ing_log_set_level(l);
	}
	rc = ing_node_start(&o, &ss, &node);
	explicit_bzero(o.auth_token, sizeof(o.auth_token));   /* the node has its copy */
	explicit_bzero(&o.tier_s3, sizeof(o.tier_s3));
	if (rc)
		return rc == -EINVAL ? ING_EXIT_USAGE : ING_EXIT_FAILURE;
	rc = ing_node_wait(node);
	ing_node_destroy(node);
	return rc;
}
