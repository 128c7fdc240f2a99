/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_conn.h - the RDMA connection-request codec the producer library and the ingest node
 * share: the 16 bytes of rdma_cm CONNECT_REQUEST private data that name the gRPC session a
 * new QP belongs to. Header-only, no dependency beyond libc: producer/ includes it without
 * any node header, dataplane/rdma/ parses it.
 */
#ifndef ING_PROTO_RDMA_CONN_H
#define ING_PROTO_RDMA_CONN_H

#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * Carried in the CONNECT_REQUEST private data (producer -> ingestd). Big-endian on the
 * wire. 16 bytes: fits every transport's private-data limit (RoCE/IB REQ: 56 bytes).
 */
#define ING_RDMA_CM_MAGIC 0x48334b52u       /* "H3KR" */
#define ING_RDMA_CM_VERSION 1
struct ing_rdma_cm_priv {
	uint32_t magic;
	uint16_t version;
	uint16_t flags;
	uint64_t session_id;
} __attribute__((packed));
/* Producer side (libingest): fill the private data of rdma_connect. */
static inline void ing_rdma_cm_priv_pack(struct ing_rdma_cm_priv *p, uint64_t session_id)
{
	memset(p, 0, sizeof(*p));
	p->magic = htobe32(ING_RDMA_CM_MAGIC);
	p->version = htobe16(ING_RDMA_CM_VERSION);
	p->session_id = htobe64(session_id);
}
/* Node side (the rdma_cm listener): 0 and *session_id, or -EPROTO (short, bad magic/version). */
static inline int ing_rdma_cm_priv_parse(const void *data, size_t len, uint64_t *session_id)
{
	struct ing_rdma_cm_priv p;

	if (!data || len < sizeof(p))
		return -EPROTO;
	memcpy(&p, data, sizeof(p));
	if (be32toh(p.magic) != ING_RDMA_CM_MAGIC || be16toh(p.version) != ING_RDMA_CM_VERSION)
		return -EPROTO;
	*session_id = be64toh(p.session_id);
	return 0;
}

#endif
