/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ack.h - the answers a call carries back (h3000.Ack): built from a frame, encoded, sent,
 * or held in the call's bounded queue while its client is not reading (the call's input is
 * paused meanwhile, so memory stays bounded). Control thread.
 */
#ifndef ING_SERVICE_ACK_H
#define ING_SERVICE_ACK_H

#include <stdbool.h>
#include <stdint.h>

#include "control/service/state.h"

#define SVC_ACK_MAX_ENC 1200u    /* encoded Ack upper bound (ids <= 256, msg < ING_FRAME_MSG_MAX) */

/* An Ack (what is sent, or held until the client reads). */
struct svc_ack {
	char frame_id[ING_ID_MAX + 1];   /* empty when the id sent was not UTF-8 or too long */
	char wafer_id[ING_ID_MAX + 1];   /* empty when not known yet (refused early) */
	uint64_t latency_ns;
	uint64_t stage_ns[SVC_NSTAGES];  /* DURABLE acks: Ack.stage*Ns, enum svc_stage order */
	uint32_t crc32c;
	uint8_t stage;
	uint8_t code;
	bool ok, retryable, duplicate;
	/* stage GRANTED (push) only */
	uint32_t grant_id, grant_rkey, grant_qp;
	uint64_t grant_addr, grant_length;
	char msg[ING_FRAME_MSG_MAX];
};

/*
 * Every answer is sent on its call; when the client does not read, it is held and the
 * call's input paused; when the queue is full (SVC_ACKQ_MAX), the call fails.
 */
/* A frame refused before admission: Ack{ok=false, code, retryable, msg}. Its ids (wafer
 * NULL: not known) are echoed, each left empty when it is not UTF-8 (an Ack's strings must
 * be) or longer than ING_ID_MAX (its prefix could be another frame's id). */
void svc_ack_refusal(struct svc_call *pc, const char *wafer, const char *frame_id, int code,
		     bool retryable, const char *msg);
/* The client reads again (on_writable): held acks go out; the input resumes once all are. */
void svc_ack_flush(struct svc_call *pc);
/* Free the call's queue (the call is over). */
void svc_ack_release(struct svc_call *pc);

/* A frame's answers on its call (nothing when the call is gone): RECEIVED (only to a session
 * that asked for it), GRANTED (push: the slot is open for the producer's WRITE), and the
 * final one from its descriptor's outcome (f->status, msg, duplicate, crc; stage_ns: the
 * stages of a durable frame). */
void svc_ack_received(struct svc_frame *e, uint64_t latency_ns);
void svc_ack_granted(struct svc_frame *e, uint32_t grant_id, uint32_t grant_rkey, uint32_t qp_num);
void svc_ack_final(struct svc_frame *e, uint64_t latency_ns, const uint64_t stage_ns[SVC_NSTAGES]);

#endif
