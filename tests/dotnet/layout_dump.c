/* SPDX-License-Identifier: Apache-2.0 */
/*
 * layout_dump - the C layout of libingest's public structs, for the .NET binding's mirror
 * structs (bindings/dotnet/H3000.Ingest/Native.cs). One line per struct ("NAME sizeof N")
 * and per field ("NAME.FIELD N", its offset); H3000.Ingest.Tests.NativeLayoutTests
 * compares them with Marshal.SizeOf/OffsetOf of the mirrors, field by field.
 */
#include <stddef.h>
#include <stdio.h>

#include <ingest/producer.h>

#define S(t) printf("%s sizeof %zu\n", #t, sizeof(struct t))
#define F(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(struct t, f))

int main(void)
{
	S(ing_producer_opts);
	F(ing_producer_opts, opts_size); F(ing_producer_opts, server); F(ing_producer_opts, transport);
	F(ing_producer_opts, credits); F(ing_producer_opts, max_frame_size);
	F(ing_producer_opts, connect_timeout_ms); F(ing_producer_opts, frame_timeout_ms);
	F(ing_producer_opts, recycle_on); F(ing_producer_opts, client_name);
	F(ing_producer_opts, pool_frames); F(ing_producer_opts, pool_frame_size);
	F(ing_producer_opts, rdma_device); F(ing_producer_opts, chunk_size);
	F(ing_producer_opts, auth_token); F(ing_producer_opts, tls_ca); F(ing_producer_opts, tls_cert);
	F(ing_producer_opts, tls_key); F(ing_producer_opts, tls_server_name);
	F(ing_producer_opts, rdma_mode); F(ing_producer_opts, servers);
	F(ing_producer_opts, ack_deadline_ms); F(ing_producer_opts, keepalive_ms);
	F(ing_producer_opts, node_cooldown_ms); F(ing_producer_opts, membership_refresh_ms);
	F(ing_producer_opts, reconnect_timeout_ms);
	F(ing_producer_opts, stripe_min);

	S(ing_frame_desc);
	F(ing_frame_desc, frame_id); F(ing_frame_desc, wafer_id); F(ing_frame_desc, timestamp);
	F(ing_frame_desc, data); F(ing_frame_desc, length); F(ing_frame_desc, crc32c);
	F(ing_frame_desc, has_crc); F(ing_frame_desc, user);

	S(ing_ack);
	F(ing_ack, frame_id); F(ing_ack, wafer_id); F(ing_ack, stage); F(ing_ack, ok);
	F(ing_ack, code); F(ing_ack, retryable); F(ing_ack, duplicate); F(ing_ack, crc32c);
	F(ing_ack, latency_ns); F(ing_ack, node_latency_ns); F(ing_ack, user); F(ing_ack, msg);
	F(ing_ack, node_stage_ns); F(ing_ack, node_id); F(ing_ack, resends); F(ing_ack, stored);

	S(ing_producer_stats);
	F(ing_producer_stats, submitted); F(ing_producer_stats, received);
	F(ing_producer_stats, durable); F(ing_producer_stats, failed);
	F(ing_producer_stats, duplicates); F(ing_producer_stats, bytes);
	F(ing_producer_stats, in_flight); F(ing_producer_stats, rerouted);
	F(ing_producer_stats, failovers); F(ing_producer_stats, resent_after_received);
	F(ing_producer_stats, late_acks); F(ing_producer_stats, first_failover_to_durable_ns);
	F(ing_producer_stats, nodes); F(ing_producer_stats, nodes_up);
	return 0;
}
