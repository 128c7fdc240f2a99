/* SPDX-License-Identifier: Apache-2.0 */
/*
 * opts.h - ingestd's options: the struct every flag and config key fills, its defaults and
 * its one option table (node/opts.c). Target ing_node_opts: what ingest-doctor,
 * ingest-stat and ingest-catalog link to read ingestd's --config file, without the node.
 * Call from main, single-threaded.
 */
#ifndef ING_NODE_OPTS_H
#define ING_NODE_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/log.h"
#include "common/token.h"
#include "dataplane/dataplane.h"
#include "dataplane/rdma/rdma.h"
#include "dataplane/store/s3.h"

/* The node's configuration: every ingestd flag has a field here (apps/ingestd.c). */
struct ing_ingestd_opts {
	const char *listen;
	const char *data_dir;
	const char *pool;
	int hugepages;             /* 1 on, 0 off, -1 auto */
	unsigned workers;
	unsigned worker_nice;      /* 0: normal priority; else SCHED_BATCH at this nice */
	enum ing_sink sink;
	unsigned credits;
	uint64_t max_frame;        /* 0: the pool's largest slot */
	uint64_t stripe_min;       /* frames of this size or more may come striped over the
				    * rails (docs/ARCHITECTURE.md "Striping"); default
				    * ING_STRIPE_DEFAULT_MIN (8 MiB); 0: off */
	unsigned frame_timeout_ms;
	const char *lcores;
	int pool_node;             /* -1: from the plan */
	/* placement overrides, as ingest-topo takes them (numa/numa.h) */
	int control_cpu;           /* -1: from the plan */
	const char *worker_cpus;   /* NULL: from the plan */
	unsigned dataplane;        /* lcores per rail; 0: ING_DEFAULT_DATAPLANE_LCORES */
	int allow_smt;             /* 1: SMT siblings as dataplane lcores */
	const char *block_dev;     /* NULL: the data dir's disk */
	const char *log_level;
	const char *port_file;
	const char *tls_cert, *tls_key;
	int ready_fd;
	const char *rdma_dev;      /* rails: "mlx5_0, mlx5_1@1" (numa/numa.h); NULL: every ACTIVE
				      device with an IPv4 address */
	/* RDMA data path (dataplane/rdma/rdma.h) */
	int rdma;                  /* 1 on (error if impossible), 0 off, -1 auto (default) */
	const char *rdma_addr;     /* rdma_cm listen addresses, one per rail; NULL: each rail's
				      netdev's */
	unsigned rdma_port;
	enum ing_rdma_poll_mode poll_mode;
	enum ing_rdma_push rdma_write; /* push grants: memory windows / pool MR / off */
	unsigned grant_ms;         /* push: a grant not written within this fails its frame */
	unsigned max_sessions;
	unsigned persist_ring;     /* per worker; 0: ING_DEFAULT_RING_SIZE */
	unsigned session_idle_ms;
	const char *auth_token_file; /* NULL: no authentication */
	char auth_token[ING_AUTH_TOKEN_MAX + 1]; /* read from it by parse_args; never logged */
	const char *tls_client_ca;   /* mTLS: client certificates must chain to it */
	/* fair sharing under abuse (0: the library default, see --help) */
	unsigned handshake_timeout_ms, idle_timeout_ms, max_connections, max_conns_per_peer;
	unsigned health_reserve, max_sessions_per_peer, max_slots_per_peer, slot_stall_ms;
	unsigned auth_fail_burst, auth_backoff_max_ms;
	enum ing_log_format log_format;
	const char *metrics_listen;  /* NULL: no /metrics endpoint */
	const char *metrics_port_file;
	const char *config;          /* the --config file, for messages */
	/* fleet (control/fleet/fleet.h, docs/FLEET_NODE.md) */
	const char *node_id;         /* NULL: the advertised address */
	const char *advertise;       /* NULL: the listen address (with the bound port) */
	const char *fleet_db;        /* libpq conninfo; NULL: no fleet catalog */
	const char *fleet_peers;     /* static membership "id=host:port,..." */
	unsigned fleet_heartbeat_ms;
	unsigned fleet_batch;
	bool drain;                  /* start DRAINING */
	/* object store tier (dataplane/tier/tier.h, README "Object store tier") */
	const char *tier;            /* s3://HOST:PORT/BUCKET[/PREFIX]; NULL: no tier */
	const char *tier_credentials;
	const char *tier_region;     /* NULL: ING_S3_DEFAULT_REGION */
	int tier_path_style;         /* 1 path-style (default), 0 virtual-hosted */
	unsigned tier_parallel;
	unsigned tier_timeout_ms;
	int64_t local_retention_ms;  /* -1: no time rule */
	unsigned local_high_water_pct;
	uint64_t local_high_water_bytes;
	struct ing_s3 tier_s3;       /* filled by parse_args from the flags above (secret inside:
				      * the node wipes its copy once the tier holds it) */
	bool check_only;             /* --check-config: validate, then exit 0 */
	bool print_only;             /* --print-config: the effective settings, then exit 0 */
	/* the command line it was parsed from (SIGHUP reads the file again, then these flags) */
	int argc;
	char **argv;
};

/* Defaults (what ingestd runs with when no flag is given). */
void ing_ingestd_opts_init(struct ing_ingestd_opts *o);

/*
 * ingestd's options (node/opts.c): one table (common/cli.h) for its flags, its config file
 * (the keys are the flag names), --help and the man page. ingest-doctor --config reads the
 * same file through it. Call from main, single-threaded.
 */
struct ing_cli;
extern const struct ing_cli ing_ingestd_cli;
/*
 * The command line: --config FILE first (flags override the file), then every flag, then
 * the checks between them (TLS pairs, files readable, the token file read into
 * o->auth_token). 0: go on; 1: --help or --version printed (exit 0); 2: a usage or config
 * error printed as one line (exit 2).
 */
int ing_ingestd_opts_parse(int argc, char **argv, struct ing_ingestd_opts *o);
/*
 * The same with the config file's text kept in buf (cap bytes; the values point into it):
 * a reload parses the file again while the running options still point into the first
 * buffer. Errors go where ing_cli_set_errors says.
 */
int ing_ingestd_opts_parse_buf(int argc, char **argv, struct ing_ingestd_opts *o, char *buf,
			       size_t cap);
/*
 * The value of option d (an entry of ing_ingestd_cli) in o as a config file takes it back:
 * 0 and the text; -ENOENT when unset (the built-in default applies; ingestd --help says
 * which). redact: a secret inside a value (a fleet-db password=) is replaced by
 * "<redacted>".
 */
struct ing_opt;
int ing_ingestd_opt_value(const struct ing_opt *d, const struct ing_ingestd_opts *o, bool redact,
			  char *buf, size_t len);
/*
 * --print-config: every setting of o in config-file syntax, in --help's sections: set ones
 * as "name = value", unset ones as "# name =" comments; secrets redacted. ingestd
 * --config takes the output back and prints the same.
 */
void ing_ingestd_print_config(const struct ing_ingestd_opts *o, FILE *f);
/* Read one config file into o (o->config = path): 0, or 2 after one line FILE:LINE: why. */
int ing_ingestd_opts_read_config(const char *path, struct ing_ingestd_opts *o);
/* The same for another program that takes ingestd's file (ingest-doctor, ingest-stat,
 * ingest-catalog --config): its errors are "PROG: FILE:LINE: ..." (one file a process). */
int ing_ingestd_opts_read_config_as(const char *prog, const char *path, struct ing_ingestd_opts *o);
/* The checks between options (as ing_ingestd_opts_parse ends with): 0 or 2 (line printed). */
int ing_ingestd_opts_finish(struct ing_ingestd_opts *o);
/*
 * The options against this machine, before anything starts: the pool must fit in memory
 * (starting: MemAvailable, else MemTotal; --hugepages on: the free hugepages); unless
 * starting, also the data dir (a directory, or creatable and writable) and the placement
 * plan (--lcores, --pool-node, --rdma-dev). 0 (note: a warning worth printing, or ""), or
 * -EINVAL with one line in why that names the flag, the numbers and the fix.
 */
int ing_ingestd_opts_check_host(const struct ing_ingestd_opts *o, bool starting, char *why,
				size_t whylen, char *note, size_t notelen);

/*
 * --data-dir against this machine: a directory this user can write, or one it can create
 * (its nearest existing ancestor a writable directory). 0, or -EINVAL with one sentence in
 * why that names the path, what it is and the fix ("... is a file, not a directory: point
 * --data-dir at a directory"). --check-config and the node's start say the same.
 */
int ing_ingestd_check_data_dir(const char *dir, char *why, size_t whylen);

/* The checks a reload (SIGHUP) makes of a new configuration before taking any of it:
 * --max-frame against the pool, the TLS key against its certificate. 0 or -EINVAL + why. */
int ing_ingestd_opts_check_reload(const struct ing_ingestd_opts *o, char *why, size_t whylen);

struct ing_plan;
struct ing_plan_opts;
/* The placement options of o as the plan takes them (ingestd, ingest-topo and
 * ingest-doctor --config). */
void ing_ingestd_plan_opts(const struct ing_ingestd_opts *o, struct ing_plan_opts *po);
/*
 * The plan ingestd makes on this machine: 0 and *plan; 1 without a topology (why says so:
 * ingestd then runs without a plan); -EINVAL for a placement flag naming what this machine
 * lacks (a usage error, one line in why naming the flag); -EIO another failure.
 */
int ing_ingestd_plan(const struct ing_ingestd_opts *o, struct ing_plan *plan, char *why,
		     size_t whylen);

#endif
