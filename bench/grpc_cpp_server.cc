// SPDX-License-Identifier: Apache-2.0
//
// grpc_cpp_server - baseline for bench/fallback.sh: the stock C++ gRPC server (Debian's
// libgrpc++, the same gRPC core as python3-grpcio) implementing h3000.RDMASvc Negotiate,
// PushFrames and Stats as bench/grpcio_server.py does: it counts the bytes of every
// FrameChunk and acks each frame when its last chunk arrives (RECEIVED then DURABLE to
// sessions that asked for RECEIVED acks, else one DURABLE), string ids echoed. Nothing is
// stored and nothing is checked. Fed by the same ingest-send client as ingestd, the ratio
// between the two is the cost of the server side.
//
//   grpc_cpp_server --api sync|callback [--listen 127.0.0.1:0] [--port-file PATH]
//
// sync: grpc::Service, one handler thread per call, blocking Read/Write (the classic API).
// callback: grpc::CallbackService, a ServerBidiReactor per call (gRPC's recommended API).
// Built on demand only (cmake --build BUILD --target bench_grpc_cpp_server): it needs
// libgrpc++-dev and protobuf-compiler-grpc, which neither make build nor make test need.

#include <grpcpp/grpcpp.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unistd.h>

#include "h3000.grpc.pb.h"

namespace {

constexpr int kMaxMsg = (4 << 20) + (64 << 10);

struct Counters {
	std::mutex mu;
	uint64_t frames = 0, bytes = 0, sessions = 0;
	std::set<uint64_t> two_stage;   // sessions that asked for RECEIVED acks
};
Counters cnt;

void negotiate(const h3000::NegotiateRequest &req, h3000::NegotiateReply *rep)
{
	uint64_t sid;
	{
		std::lock_guard<std::mutex> g(cnt.mu);
		sid = ++cnt.sessions;
		if (req.ackreceived())
			cnt.two_stage.insert(sid);
	}
	uint32_t credits = req.credits() && req.credits() < 64 ? req.credits() : 64;
	rep->set_version(1);
	rep->set_sessionid(sid);
	rep->set_transport(h3000::TRANSPORT_GRPC_STREAM);
	rep->add_available(h3000::TRANSPORT_GRPC_STREAM);
	rep->set_maxframesize(64ull << 20);
	rep->set_credits(credits);
	rep->set_maxchunksize(1u << 20);
	rep->set_message("grpc++ baseline: counts bytes, stores nothing");
	rep->set_serverversion(std::string("grpc++-") + grpc::Version());
	rep->set_ackreceived(req.ackreceived());
}

void stats(h3000::StatsReply *rep)
{
	std::lock_guard<std::mutex> g(cnt.mu);
	rep->set_framesreceived(cnt.frames);
	rep->set_framesdurable(cnt.frames);
	rep->set_bytesreceived(cnt.bytes);
	rep->set_bytesdurable(cnt.bytes);
}

uint64_t session_of(const std::multimap<grpc::string_ref, grpc::string_ref> &md)
{
	auto it = md.find("h3000-session-id");
	if (it == md.end())
		return 0;
	return strtoull(std::string(it->second.data(), it->second.size()).c_str(), nullptr, 10);
}

// One PushFrames call's frames: bytes so far and wafer, by frame id. on_chunk returns the
// acks a chunk causes (none, or RECEIVED + DURABLE / DURABLE at its frame's last chunk).
struct Frames {
	uint64_t sid = 0;
	std::map<std::string, std::pair<uint64_t, std::string>> got;

	void on_chunk(const h3000::FrameChunk &ch, std::deque<h3000::Ack> *out)
	{
		if (ch.has_meta())
			got[ch.frameid()] = { 0, ch.meta().waferid().empty() ? "default" : ch.meta().waferid() };
		auto &e = got.try_emplace(ch.frameid(), 0, "default").first->second;
		e.first += ch.data().size();
		if (!ch.last())
			return;
		auto ent = e;
		got.erase(ch.frameid());
		bool two;
		{
			std::lock_guard<std::mutex> g(cnt.mu);
			cnt.frames++;
			cnt.bytes += ent.first;
			two = cnt.two_stage.count(sid ? sid : ch.sessionid()) != 0;
		}
		h3000::Ack a;
		a.set_frameid(ch.frameid());
		a.set_waferid(ent.second);
		a.set_ok(true);
		if (two) {
			a.set_stage(h3000::ACK_STAGE_RECEIVED);
			out->push_back(a);
		}
		a.set_msg("ok");
		a.set_stage(h3000::ACK_STAGE_DURABLE);
		out->push_back(a);
	}
};

// ---------------------------------------------------------------- sync API

class SyncSvc final : public h3000::RDMASvc::Service {
	grpc::Status Negotiate(grpc::ServerContext *, const h3000::NegotiateRequest *req,
			       h3000::NegotiateReply *rep) override
	{
		negotiate(*req, rep);
		return grpc::Status::OK;
	}

	grpc::Status PushFrames(grpc::ServerContext *ctx,
				grpc::ServerReaderWriter<h3000::Ack, h3000::FrameChunk> *s) override
	{
		Frames fr;
		fr.sid = session_of(ctx->client_metadata());
		h3000::FrameChunk ch;
		std::deque<h3000::Ack> acks;
		while (s->Read(&ch)) {
			fr.on_chunk(ch, &acks);
			for (; !acks.empty(); acks.pop_front())
				if (!s->Write(acks.front()))
					return grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
		}
		return grpc::Status::OK;
	}

	grpc::Status Stats(grpc::ServerContext *, const h3000::StatsRequest *,
			   h3000::StatsReply *rep) override
	{
		stats(rep);
		return grpc::Status::OK;
	}
};

// ---------------------------------------------------------------- callback API

class PushReactor final : public grpc::ServerBidiReactor<h3000::FrameChunk, h3000::Ack> {
public:
	explicit PushReactor(grpc::CallbackServerContext *ctx)
	{
		fr_.sid = session_of(ctx->client_metadata());
		StartRead(&ch_);
	}

	void OnReadDone(bool ok) override
	{
		std::lock_guard<std::mutex> g(mu_);
		if (!ok) {
			reads_done_ = true;
			maybe_finish();
			return;
		}
		bool idle = pending_.empty() && !writing_;
		fr_.on_chunk(ch_, &pending_);
		if (idle)
			write_next();
		StartRead(&ch_);
	}

	void OnWriteDone(bool ok) override
	{
		std::lock_guard<std::mutex> g(mu_);
		writing_ = false;
		if (!ok) {
			pending_.clear();
			failed_ = true;
		} else {
			pending_.pop_front();
		}
		write_next();
		maybe_finish();
	}

	void OnDone() override { delete this; }

private:
	void write_next()
	{
		if (writing_ || pending_.empty() || failed_)
			return;
		writing_ = true;
		StartWrite(&pending_.front());
	}

	void maybe_finish()
	{
		if (reads_done_ && !writing_ && (pending_.empty() || failed_) && !finished_) {
			finished_ = true;
			Finish(grpc::Status::OK);
		}
	}

	std::mutex mu_;
	Frames fr_;
	h3000::FrameChunk ch_;
	std::deque<h3000::Ack> pending_;   // front is being written while writing_
	bool writing_ = false, reads_done_ = false, failed_ = false, finished_ = false;
};

class CallbackSvc final : public h3000::RDMASvc::CallbackService {
	grpc::ServerUnaryReactor *Negotiate(grpc::CallbackServerContext *ctx,
					    const h3000::NegotiateRequest *req,
					    h3000::NegotiateReply *rep) override
	{
		negotiate(*req, rep);
		auto *r = ctx->DefaultReactor();
		r->Finish(grpc::Status::OK);
		return r;
	}

	grpc::ServerBidiReactor<h3000::FrameChunk, h3000::Ack> *
	PushFrames(grpc::CallbackServerContext *ctx) override
	{
		return new PushReactor(ctx);
	}

	grpc::ServerUnaryReactor *Stats(grpc::CallbackServerContext *ctx, const h3000::StatsRequest *,
					h3000::StatsReply *rep) override
	{
		stats(rep);
		auto *r = ctx->DefaultReactor();
		r->Finish(grpc::Status::OK);
		return r;
	}
};

void usage()
{
	fprintf(stderr, "usage: grpc_cpp_server --api sync|callback [--listen HOST:PORT] [--port-file PATH]\n");
	exit(2);
}

}  // namespace

int main(int argc, char **argv)
{
	std::string api, listen = "127.0.0.1:0", port_file;
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		if (i + 1 >= argc)
			usage();
		if (a == "--api")
			api = argv[++i];
		else if (a == "--listen")
			listen = argv[++i];
		else if (a == "--port-file")
			port_file = argv[++i];
		else
			usage();
	}
	if (api != "sync" && api != "callback")
		usage();
	// SIGTERM/SIGINT blocked before gRPC starts its threads (they inherit the mask), taken
	// by sigwait below: a clean shutdown and the counts on stderr
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, nullptr);

	SyncSvc sync_svc;
	CallbackSvc cb_svc;
	grpc::ServerBuilder b;
	int port = 0;
	b.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
	b.SetMaxReceiveMessageSize(kMaxMsg);
	b.SetMaxSendMessageSize(kMaxMsg);
	if (api == "sync")
		b.RegisterService(&sync_svc);
	else
		b.RegisterService(&cb_svc);
	std::unique_ptr<grpc::Server> srv = b.BuildAndStart();
	if (!srv || !port) {
		fprintf(stderr, "grpc_cpp_server: cannot listen on %s\n", listen.c_str());
		return 2;
	}
	if (!port_file.empty()) {
		std::string tmp = port_file + ".tmp";
		FILE *f = fopen(tmp.c_str(), "w");
		if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 || rename(tmp.c_str(), port_file.c_str())) {
			fprintf(stderr, "grpc_cpp_server: cannot write %s\n", port_file.c_str());
			return 1;
		}
	}
	fprintf(stderr, "grpc_cpp_server: %s API listening on port %d (grpc++ %s)\n", api.c_str(), port,
		grpc::Version().c_str());

	int sig = 0;
	sigwait(&set, &sig);
	srv->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
	std::lock_guard<std::mutex> g(cnt.mu);
	fprintf(stderr, "grpc_cpp_server: %llu frames, %llu bytes, %llu sessions\n",
		(unsigned long long)cnt.frames, (unsigned long long)cnt.bytes,
		(unsigned long long)cnt.sessions);
	return 0;
}
