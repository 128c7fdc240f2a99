/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ack.c - the answers on a call (ack.h): encoded into the call's send buffer, or held in a
 * ring that grows to SVC_ACKQ_MAX while the client does not read them (the call's input is
 * paused meanwhile: the client cannot send more frames than it reads answers for).
 */
#include "control/service/ack.h"
#include "common/ident.h"
#include "common/log.h"
#include "h3000.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t ack_encode(const struct svc_ack *a, uint8_t *buf, size_t cap)
{
	H3000__Ack m = H3000__ACK__INIT;
	m.frameid = (char *)a->frame_id;
	m.waferid = (char *)a->wafer_id;
	m.ok = a->ok;
	m.msg = (char *)a->msg;
	m.stage = (H3000__AckStage)a->stage;
	m.code = (H3000__ErrorCode)a->code;
	m.retryable = a->retryable;
	m.duplicate = a->duplicate;
	m.crc32c = a->crc32c;
	m.latencyns = a->latency_ns;
	m.stagereceivedns = a->stage_ns[SVC_ST_RECEIVED];
	m.stagecrcns = a->stage_ns[SVC_ST_CRC];
	m.stagewrittenns = a->stage_ns[SVC_ST_WRITTEN];
	m.stagesyncedns = a->stage_ns[SVC_ST_SYNCED];
	m.stagecataloguedns = a->stage_ns[SVC_ST_CATALOGUED];
	m.stageackns = a->stage_ns[SVC_ST_ACK];
	m.grantid = a->grant_id;
	m.grantaddr = a->grant_addr;
	m.grantrkey = a->grant_rkey;
	m.grantlength = a->grant_length;
	m.grantqpnum = a->grant_qp;
	m.stored = a->ok && a->stage == H3000__ACK_STAGE__ACK_STAGE_DURABLE;
	size_t n = h3000__ack__get_packed_size(&m);
	if (n > cap)
		return 0;
	return h3000__ack__pack(&m, buf);
}

static int aq_push(struct svc_call *pc, const struct svc_ack *a)
{
	if (!pc->aq) {
		pc->aq_cap = 256;
		pc->aq = malloc(pc->aq_cap * sizeof(*pc->aq));
		if (!pc->aq)
			return -ENOMEM;
	}
	if (pc->aq_len == pc->aq_cap) {
		if (pc->aq_cap >= SVC_ACKQ_MAX)
			return -ENOBUFS;
		/* grow, unrolling the ring */
		struct svc_ack *n = malloc(2 * pc->aq_cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		for (unsigned i = 0; i < pc->aq_len; i++)
			n[i] = pc->aq[(pc->aq_head + i) % pc->aq_cap];
		free(pc->aq);
		pc->aq = n;
		pc->aq_head = 0;
		pc->aq_cap *= 2;
	}
	pc->aq[(pc->aq_head + pc->aq_len) % pc->aq_cap] = *a;
	pc->aq_len++;
	return 0;
}

static int ack_send(struct svc_call *pc, const struct svc_ack *a)
{
	uint8_t buf[SVC_ACK_MAX_ENC];
	if (pc->closing)
		return -EPIPE;
	if (pc->aq_len == 0) {
		size_t n = ack_encode(a, buf, sizeof(buf));
		int rc = ing_grpc_call_send(pc->call, buf, n);
		if (rc != -ENOBUFS)
			return rc;
	}
	int rc = aq_push(pc, a);
	if (rc) {
		ING_LOGC(ING_LOG_WARN, "svc", &pc->lc, "call %" PRIu64 " from %s: client is not reading its "
			 "acks (%u queued); failing the call", pc->id, pc->peer_str, pc->aq_len);
		svc_call_finish_later(pc, ING_GRPC_RESOURCE_EXHAUSTED, "client is not reading its acks");
		return rc;
	}
	if (!pc->acks_waiting) {
		ING_DBG("svc", "call %" PRIu64 " from %s: send buffer full, input paused until the client reads",
			pc->id, pc->peer_str);
		pc->acks_waiting = true;
		svc_call_input(pc);
	}
	return 0;
}

void svc_ack_flush(struct svc_call *pc)
{
	uint8_t buf[SVC_ACK_MAX_ENC];
	while (pc->aq_len && !pc->finished) {
		size_t n = ack_encode(&pc->aq[pc->aq_head], buf, sizeof(buf));
		int rc = ing_grpc_call_send(pc->call, buf, n);
		if (rc == -ENOBUFS)
			return;
		pc->aq_head = (pc->aq_head + 1) % pc->aq_cap;
		pc->aq_len--;
		if (rc)
			break;
	}
	if (pc->aq_len == 0) {
		pc->acks_waiting = false;
		svc_call_input(pc);
		svc_call_check_done(pc);
	}
}

void svc_ack_release(struct svc_call *pc)
{
	free(pc->aq);
	pc->aq = NULL;
	pc->aq_len = pc->aq_cap = pc->aq_head = 0;
}

static void copy_utf8(char *dst, const char *src)
{
	size_t n = src ? strnlen(src, ING_ID_MAX + 1) : 0;
	if (n && n <= ING_ID_MAX && ing_utf8_valid(src, n))
		memcpy(dst, src, n);
	else
		n = 0;
	dst[n] = '\0';
}

void svc_ack_refusal(struct svc_call *pc, const char *wafer, const char *frame_id, int code,
		     bool retryable, const char *msg)
{
	struct svc_ack a = { .ok = false, .code = (uint8_t)code, .retryable = retryable };

	copy_utf8(a.frame_id, frame_id);
	copy_utf8(a.wafer_id, wafer);
	snprintf(a.msg, sizeof(a.msg), "%s", msg);
	ack_send(pc, &a);
}

/* An admitted frame's ids: valid UTF-8 of at most ING_ID_MAX bytes (the id rule). */
static void frame_ids(struct svc_ack *a, const struct ing_frame *f)
{
	memcpy(a->frame_id, f->frame_id, sizeof(a->frame_id));
	memcpy(a->wafer_id, f->wafer_id, sizeof(a->wafer_id));
}

void svc_ack_received(struct svc_frame *e, uint64_t latency_ns)
{
	if (!e->call || !e->sess || !e->sess->ack_received)
		return;
	struct svc_ack a = { .ok = true, .stage = H3000__ACK_STAGE__ACK_STAGE_RECEIVED,
			     .latency_ns = latency_ns };
	frame_ids(&a, e->f);
	ack_send(e->call, &a);
}

/* A frame whose call is gone is never written: its grant expires in the lcore. The lcore
 * still owns the frame: only what admission set is read here (buf, length, ids). */
void svc_ack_granted(struct svc_frame *e, uint32_t grant_id, uint32_t grant_rkey, uint32_t qp_num)
{
	if (!e->call)
		return;
	struct svc_ack a = {
		.ok = true,
		.stage = H3000__ACK_STAGE__ACK_STAGE_GRANTED,
		.grant_id = grant_id,
		.grant_rkey = grant_rkey,
		.grant_qp = qp_num,
		.grant_addr = (uint64_t)(uintptr_t)e->f->buf,
		.grant_length = e->f->length,
	};
	frame_ids(&a, e->f);
	ack_send(e->call, &a);
}

void svc_ack_final(struct svc_frame *e, uint64_t latency_ns, const uint64_t stage_ns[SVC_NSTAGES])
{
	const struct ing_frame *f = e->f;
	bool ok = f->status == ING_E_NONE;
	struct svc_ack a = {
		.ok = ok,
		.code = (uint8_t)f->status,
		.retryable = f->retryable,
		.duplicate = f->duplicate,
		.crc32c = f->crc_computed,
		/* a failed frame has no stage: DURABLE would read as stored to a client that
		   looks at the stage alone (Ack.stored says it plainly) */
		.stage = ok ? H3000__ACK_STAGE__ACK_STAGE_DURABLE : H3000__ACK_STAGE__ACK_STAGE_UNSPECIFIED,
		.latency_ns = latency_ns,
	};
	if (!e->call)
		return;
	frame_ids(&a, f);
	if (ok) {
		memcpy(a.msg, "ok", 3);   /* what the seed's consumer says */
		memcpy(a.stage_ns, stage_ns, sizeof(a.stage_ns));
	} else {
		size_t n = strnlen(f->msg, sizeof(f->msg) - 1);
		memcpy(a.msg, f->msg, n);
		a.msg[n] = '\0';
		if (n == 0)
			snprintf(a.msg, sizeof(a.msg), "frame %s: persistence failed (code %d)",
				 f->frame_id, (int)f->status);
	}
	ack_send(e->call, &a);
}
