// SPDX-License-Identifier: Apache-2.0
//
// interop.seed_dotnet: Grpc.Net.Client (.NET's own HTTP/2 stack, SocketsHttpHandler)
// against a real ingestd on 127.0.0.1. Two generated assemblies, as a C# team has them:
// the seed client (SeedClient, from tests/interop/seed/rdma_stream.proto alone: namespace
// H3000) and the project's protocol (H3000Proto, from the installed copy of proto/h3000.proto
// + health.proto, share/h3000-ingest/proto: namespace H3000.Ingest.Protocol, its
// csharp_namespace). Both in one program with no extern alias: their names differ.
//
//   seed        SeedClient run as its own program: 500 GUID frames, no waferId, ms
//               timestamps, one ControlStream: exactly one Ack per frame, correlated by
//               frameId, clear NACKs (no RDMA behind a stream here), status OK
//   names       the seed's generated types (H3000.*) and the project's
//               (H3000.Ingest.Protocol.*) in one program: the same wire names
//               (h3000.FrameMeta, /h3000.RDMASvc/ControlStream), a seed FrameMeta's bytes
//               read by the project's type and back, byte for byte
//   ids         ids outside the rule (empty, 257 bytes, control characters) -> ok=false
//               naming the rule; 256-byte and multi-byte ids pass; the stream goes on
//   push64      Negotiate's maxChunkSize; two 64 MiB frames pushed in chunks of that size
//               (.NET writes them as 16 KiB DATA frames): DURABLE, stored, byte-exact
//   cancel      a deadline and a cancel mid-frame (PushFrames) and a cancel mid-stream
//               (ControlStream, writer still busy): the node stays SERVING, every pool
//               slot back, nothing in flight, the next frame is stored
//   status      unknown method -> Unimplemented, an oversize message -> ResourceExhausted,
//               Stats (histograms) under the 4 MB receive cap: the node's statuses reach
//               .NET as they are, never as Cancelled/Internal
//   many        300 ControlStreams at once on one GrpcChannel: with
//               EnableMultipleHttp2Connections (256 streams per connection, a second
//               connection for the rest) every stream gets its Ack while all are open;
//               without it (one connection) .NET queues the rest and all are served too
//   tls, mtls   https:// with the test's own CA; a client certificate for --tls-client-ca;
//               a client that trusts another CA or brings no certificate is refused
//   auth        --auth-token-file: a stream without a session is Unauthenticated,
//               Negotiate with the token gives a session that PushFrames names in
//               h3000-session-id
//   ping        (concurrently with the rest) a ControlStream open for --ping-minutes
//               with PINGs every second and .NET's own RTT PINGs: every frame acked, the
//               channel still on its first connection (no GOAWAY)
//   stop        SIGTERM with streams open: a clean Unavailable, not a reset; exit 0
//
// usage: Interop --work DIR [--ping-minutes M]      (ING_BUILD_DIR: the build tree)
// Prints "N passed, M failed" last; exit 1 on any failure.
using System.Diagnostics;
using System.Net;
using System.Net.Http;
using System.Net.Security;
using System.Net.Sockets;
using System.Security.Cryptography.X509Certificates;
using System.Text.Json;
using Google.Protobuf;
using Grpc.Core;
using Grpc.Health.V1;
using Grpc.Net.Client;
using H3000.Ingest.Protocol;
using H3000.TestCommon;
using SeedAck = H3000.Ack;
using SeedClientT = H3000.RDMASvc.RDMASvcClient;
using SeedMeta = H3000.FrameMeta;

namespace Interop;

internal static class Program
{
    private static int _passed;
    private static readonly List<string> Failures = [];
    private static readonly object Gate = new();

    private static void Check(bool ok, string what)
    {
        lock (Gate)
        {
            if (ok) _passed++; else Failures.Add(what);
            Console.WriteLine((ok ? "ok: " : "FAIL: ") + what);
        }
    }

    private static string Work = "";

    public static async Task<int> Main(string[] args)
    {
        double pingMinutes = 2;
        for (int i = 0; i + 1 < args.Length; i += 2)
        {
            if (args[i] == "--work") Work = args[i + 1];
            else if (args[i] == "--ping-minutes") pingMinutes = double.Parse(args[i + 1], System.Globalization.CultureInfo.InvariantCulture);
        }
        if (Work.Length == 0)
        {
            Console.Error.WriteLine("usage: Interop --work DIR [--ping-minutes M]");
            return 2;
        }
        if (Directory.Exists(Work))
            Directory.Delete(Work, true);
        Directory.CreateDirectory(Work);
        using var watchdog = new Timer(_ =>
        {
            Console.WriteLine($"FAIL: watchdog: the test did not finish in {pingMinutes + 8} minutes");
            Console.WriteLine($"{_passed} passed, {Failures.Count + 1} failed");
            Environment.Exit(1);
        }, null, TimeSpan.FromMinutes(pingMinutes + 8), Timeout.InfiniteTimeSpan);

        var sw = Stopwatch.StartNew();
        IngestNode? node = null;
        try
        {
            node = await IngestNode.StartAsync(Path.Combine(Work, "plain"), "--pool", "1M:16,4M:8,64M:2", "--workers", "1",
                                               "--frame-timeout", "20", "--rdma", "off");
            string url = "http://" + node.Address;
            Task ping = PingCase(url, pingMinutes);
            await Step("names", NamesCase);
            await Step("seed", () => SeedCase(url));
            await Step("ids", () => IdsCase(url));
            await Step("push64", () => Push64Case(node, url));
            await Step("cancel", () => CancelCase(node, url));
            await Step("status", () => StatusCase(url));
            await Step("many", () => ManyCase(url));
            await Step("tls", () => TlsCase(mtls: false));
            await Step("mtls", () => TlsCase(mtls: true));
            await Step("auth", AuthCase);
            await Step("ping", () => ping);
            await Step("stop", () => StopCase(node, url));
        }
        catch (Exception e)
        {
            Check(false, "unexpected: " + e);
        }
        finally
        {
            if (node != null)
            {
                if (Failures.Count > 0)
                    Console.WriteLine("--- ingestd log (tail)\n" + node.LogTail());
                await node.DisposeAsync();
            }
        }
        Console.WriteLine($"(all cases: {sw.Elapsed.TotalSeconds:F1} s)");
        if (Failures.Count == 0)
            Directory.Delete(Work, true);   // 128 MiB of frames
        Console.WriteLine($"{_passed} passed, {Failures.Count} failed");
        return Failures.Count == 0 ? 0 : 1;
    }

    private static async Task Step(string name, Func<Task> f)
    {
        var sw = Stopwatch.StartNew();
        try
        {
            await f();
        }
        catch (Exception e)
        {
            Check(false, $"{name}: unexpected: {e}");
        }
        Console.WriteLine($"  ({name}: {sw.Elapsed.TotalSeconds:F1} s)");
    }

    // ------------------------------------------------------------------ channels

    /// <summary>A channel with its own SocketsHttpHandler; counts the TCP connections it opens.</summary>
    private sealed class Chan : IDisposable
    {
        public int Connections;
        public GrpcChannel Channel = null!;
        public void Dispose() => Channel.Dispose();
    }

    private static Chan Open(string url, bool multi = true, Pki? trust = null, X509Certificate2? clientCert = null,
                             TimeSpan? pingEvery = null)
    {
        var c = new Chan();
        var h = new SocketsHttpHandler
        {
            EnableMultipleHttp2Connections = multi,
            ConnectCallback = async (ctx, ct) =>
            {
                Interlocked.Increment(ref c.Connections);
                var s = new Socket(SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
                try
                {
                    await s.ConnectAsync(ctx.DnsEndPoint, ct);
                    return new NetworkStream(s, ownsSocket: true);
                }
                catch
                {
                    s.Dispose();
                    throw;
                }
            },
        };
        if (pingEvery is { } pe)
        {
            h.KeepAlivePingDelay = pe;
            h.KeepAlivePingTimeout = TimeSpan.FromSeconds(20);
            h.KeepAlivePingPolicy = HttpKeepAlivePingPolicy.Always;
        }
        if (trust != null)
        {
            h.SslOptions.RemoteCertificateValidationCallback = (_, cert, _, errors) => trust.Validate(cert as X509Certificate2, errors);
            if (clientCert != null)
                h.SslOptions.ClientCertificates = [clientCert];
        }
        c.Channel = GrpcChannel.ForAddress(url, new GrpcChannelOptions { HttpHandler = h });
        return c;
    }

    private static DateTime In(double seconds) => DateTime.UtcNow.AddSeconds(seconds);

    private static async Task<bool> Serving(GrpcChannel ch)
    {
        try
        {
            var r = await new Health.HealthClient(ch).CheckAsync(new HealthCheckRequest(), deadline: In(5));
            return r.Status == HealthCheckResponse.Types.ServingStatus.Serving;
        }
        catch (RpcException)
        {
            return false;
        }
    }

    private static async Task<bool> SlotsBack(GrpcChannel ch)
    {
        var client = new RDMASvc.RDMASvcClient(ch);
        long end = Environment.TickCount64 + 20000;
        while (Environment.TickCount64 < end)
        {
            try
            {
                StatsReply s = await client.StatsAsync(new StatsRequest(), deadline: In(5));
                if (s.PoolSlotsFree == s.PoolSlotsTotal && s.FramesInFlight == 0)
                    return true;
            }
            catch (RpcException)
            {
            }
            await Task.Delay(100);
        }
        return false;
    }

    private static IEnumerable<FrameChunk> Chunks(string frameId, byte[] data, int chunk, string wafer, ulong session = 0)
    {
        for (int off = 0; off < data.Length; off += chunk)
        {
            int n = Math.Min(chunk, data.Length - off);
            var c = new FrameChunk
            {
                FrameId = frameId,
                Offset = (ulong)off,
                Last = off + n >= data.Length,
                Data = UnsafeByteOperations.UnsafeWrap(data.AsMemory(off, n)),
                SessionId = session,
            };
            if (off == 0)
                c.Meta = new FrameMeta { FrameId = frameId, Length = (ulong)data.Length, WaferId = wafer, Timestamp = DateTimeOffset.UtcNow.ToUnixTimeMilliseconds() };
            yield return c;
        }
    }

    /// <summary>PushFrames of whole frames; the acks and the final status.</summary>
    private static async Task<(List<Ack> Acks, StatusCode Status, string Detail)> Push(
        RDMASvc.RDMASvcClient client, IEnumerable<FrameChunk> chunks, Metadata? md = null, double seconds = 120)
    {
        using var call = client.PushFrames(md, deadline: In(seconds));
        var acks = new List<Ack>();
        var reader = Task.Run(async () =>
        {
            await foreach (Ack a in call.ResponseStream.ReadAllAsync())
                acks.Add(a);
        });
        try
        {
            foreach (FrameChunk c in chunks)
                await call.RequestStream.WriteAsync(c);
            await call.RequestStream.CompleteAsync();
            await reader;
            return (acks, call.GetStatus().StatusCode, call.GetStatus().Detail);
        }
        catch (RpcException e)
        {
            // a write that fails because the node ended the call: the call's own status
            // (its trailers) says why, as a .NET client should read it
            try { await reader; } catch (RpcException) { }
            try
            {
                Status st = call.GetStatus();
                return (acks, st.StatusCode, st.Detail + " (write: " + e.StatusCode + ")");
            }
            catch (InvalidOperationException)
            {
                return (acks, e.StatusCode, e.Status.Detail + " " + e.Status.DebugException?.Message);
            }
        }
    }

    private static bool SameFile(string path, byte[] data)
    {
        try
        {
            var f = new FileInfo(path);
            if (!f.Exists || f.Length != data.Length)
                return false;
            return File.ReadAllBytes(path).AsSpan().SequenceEqual(data);
        }
        catch (IOException)
        {
            return false;
        }
    }

    // ------------------------------------------------------------------ cases

    private static async Task SeedCase(string url)
    {
        // the seed client as its own program (dotnet SeedClient.dll), as a C# team runs it
        string dll = Path.Combine(AppContext.BaseDirectory, "SeedClient.dll");
        var psi = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true };
        foreach (string a in new[] { dll, "--server", url, "--frames", "500" })
            psi.ArgumentList.Add(a);
        using Process p = Process.Start(psi)!;
        Task<string> err = p.StandardError.ReadToEndAsync();
        string line = (await p.StandardOutput.ReadToEndAsync()).Trim();
        using (var cts = new CancellationTokenSource(120000))
            await p.WaitForExitAsync(cts.Token);
        JsonElement r;
        try
        {
            r = JsonDocument.Parse(line).RootElement;
        }
        catch (JsonException)
        {
            Check(false, $"seed: SeedClient printed {line} {await err} (exit {p.ExitCode})");
            return;
        }
        Check(p.ExitCode == 0 && r.GetProperty("status").GetString() == "OK", $"seed: SeedClient's ControlStream ends OK ({line})");
        Check(r.GetProperty("acks").GetInt32() == 500 && r.GetProperty("distinct").GetInt32() == 500 && r.GetProperty("unknown").GetInt32() == 0,
              "seed: 500 frames -> exactly one Ack each, every Ack correlated to a frame sent");
        Check(r.GetProperty("nack").GetInt32() == 500 && r.GetProperty("firstMsg").GetString()!.Contains("RDMA", StringComparison.Ordinal),
              $"seed: clear NACKs (ok=false, a msg: {r.GetProperty("firstMsg").GetString()})");
    }

    // csharp_namespace names the C# code only: what goes on the wire is the same
    private static Task NamesCase()
    {
        Check(typeof(SeedMeta).Namespace == "H3000" && typeof(FrameMeta).Namespace == "H3000.Ingest.Protocol",
              $"names: seed types in {typeof(SeedMeta).Namespace}, the project's in {typeof(FrameMeta).Namespace}");
        Check(SeedMeta.Descriptor.FullName == FrameMeta.Descriptor.FullName && SeedAck.Descriptor.FullName == Ack.Descriptor.FullName,
              $"names: the same message names on the wire ({SeedMeta.Descriptor.FullName}, {SeedAck.Descriptor.FullName})");
        string seedPath = H3000.RDMASvc.Descriptor.FindMethodByName("ControlStream").Service.FullName + "/ControlStream";
        string projPath = RDMASvc.Descriptor.FindMethodByName("ControlStream").Service.FullName + "/ControlStream";
        Check(seedPath == projPath && seedPath == "h3000.RDMASvc/ControlStream", $"names: the same gRPC path /{seedPath} (project /{projPath})");
        var sm = new SeedMeta
        {
            FrameId = "fr\u00e9me-1", Addr = ulong.MaxValue - 1, Rkey = uint.MaxValue - 2, Length = 1UL << 40,
            WaferId = "w-\u2603", Timestamp = long.MinValue + 5,
        };
        byte[] wire = sm.ToByteArray();
        FrameMeta pm = FrameMeta.Parser.ParseFrom(wire);
        Check(pm.FrameId == sm.FrameId && pm.Addr == sm.Addr && pm.Rkey == sm.Rkey && pm.Length == sm.Length &&
              pm.WaferId == sm.WaferId && pm.Timestamp == sm.Timestamp && pm.ToByteArray().AsSpan().SequenceEqual(wire),
              $"names: a seed FrameMeta ({wire.Length} bytes) read by the project's FrameMeta: the same six fields, the same bytes back");
        return Task.CompletedTask;
    }

    private static async Task IdsCase(string url)
    {
        using Chan c = Open(url);
        var client = new SeedClientT(c.Channel);
        using var call = client.ControlStream(deadline: In(60));
        async Task<SeedAck?> One(string id)
        {
            var m = new SeedMeta { FrameId = id, Addr = 4096, Rkey = 7, Length = 4096, Timestamp = DateTimeOffset.UtcNow.ToUnixTimeMilliseconds() };
            await call.RequestStream.WriteAsync(m);
            using var cts = new CancellationTokenSource(10000);
            return await call.ResponseStream.MoveNext(cts.Token) ? call.ResponseStream.Current : null;
        }
        SeedAck? guid = await One(Guid.NewGuid().ToString());
        string nack = guid?.Msg.Replace(guid.FrameId, "<id>", StringComparison.Ordinal) ?? "";
        foreach ((string what, string id) in new[] { ("a 256-byte id", new string('x', 256)), ("a multi-byte UTF-8 id", "wafer-\u03a9-\u6f22\u5b57-" + Guid.NewGuid()), ("128 two-byte characters", new string('\u00e9', 128)) })
        {
            SeedAck? a = await One(id);
            Check(a != null && a.FrameId == id && !a.Ok && a.Msg.Replace(id, "<id>", StringComparison.Ordinal) == nack,
                  $"ids: {what} passes the rule (the same NACK as a GUID)");
        }
        foreach ((string what, string id, string rule, string ackId) in new[]
                 {
                     ("an empty id", "", "empty", ""), ("a 257-byte id", new string('y', 257), "long", ""),
                     ("a control character", "ab\u0001cd", "control", "ab\u0001cd"), ("a newline", "frame\n1", "control", "frame\n1"),
                 })
        {
            SeedAck? a = await One(id);
            Check(a != null && !a.Ok && a.FrameId == ackId && a.Msg.Contains(rule, StringComparison.OrdinalIgnoreCase) && a.Msg.Contains("256", StringComparison.Ordinal),
                  $"ids: {what}: ok=false, the msg names the rule ({a?.Msg})");
        }
        string last = Guid.NewGuid().ToString();
        SeedAck? l = await One(last);
        Check(l != null && l.FrameId == last && !l.Ok, "ids: the stream goes on after bad ids");
        await call.RequestStream.CompleteAsync();
        bool more = await call.ResponseStream.MoveNext(CancellationToken.None);
        Check(!more && call.GetStatus().StatusCode == StatusCode.OK, $"ids: then status OK, no extra Ack ({call.GetStatus()})");
    }

    private static async Task Push64Case(IngestNode node, string url)
    {
        using Chan c = Open(url);
        var client = new RDMASvc.RDMASvcClient(c.Channel);
        NegotiateReply n = await client.NegotiateAsync(new NegotiateRequest
        {
            VersionMin = 1, VersionMax = 1, ClientName = "dotnet-interop", Transports = { Transport.GrpcStream },
        }, deadline: In(10));
        Check(n.MaxChunkSize > 0 && n.MaxFrameSize >= 64UL << 20 && n.AckStored,
              $"push64: Negotiate: maxChunkSize {n.MaxChunkSize}, maxFrameSize {n.MaxFrameSize}, ackStored {n.AckStored}");
        var frames = new Dictionary<string, byte[]>();
        for (int i = 0; i < 2; i++)
        {
            string id = "dn64-" + i;
            frames[id] = Synth.Bytes(id, 64 << 20, 7);
        }
        var sw = Stopwatch.StartNew();
        var md = new Metadata { { "h3000-session-id", n.SessionId.ToString(System.Globalization.CultureInfo.InvariantCulture) } };
        var (acks, st, det) = await Push(client, frames.SelectMany(kv => Chunks(kv.Key, kv.Value, (int)n.MaxChunkSize, "dn-wafer")), md);
        double s = sw.Elapsed.TotalSeconds;
        Check(st == StatusCode.OK, $"push64: PushFrames status OK ({st} {det})");
        Check(frames.Keys.All(f => acks.Count(a => a.FrameId == f) == 1 && acks.Single(a => a.FrameId == f) is { Ok: true, Stored: true, Stage: AckStage.Durable }),
              $"push64: one DURABLE, stored ack per 64 MiB frame ({string.Join("; ", acks.Select(a => $"{a.FrameId} {a.Stage} {a.Ok} {a.Msg}"))}), {128 / s:F0} MiB/s");
        Check(frames.All(kv => SameFile(node.FramePath("dn-wafer", kv.Key), kv.Value)), "push64: both files byte-exact");
    }

    private static async Task CancelCase(IngestNode node, string url)
    {
        using Chan c = Open(url);
        var client = new RDMASvc.RDMASvcClient(c.Channel);
        async Task Afterwards(string what)
        {
            Check(await Serving(c.Channel), $"cancel: {what}: health SERVING");
            Check(await SlotsBack(c.Channel), $"cancel: {what}: every pool slot back, nothing in flight (Stats)");
            string f = "dn-after-" + what.Replace(' ', '-');
            byte[] d = Synth.Bytes(f, 100000, 3);
            var (acks, st, _) = await Push(client, Chunks(f, d, 1 << 20, "dn-wafer"));
            Check(st == StatusCode.OK && acks.Count == 1 && acks[0].Stored && SameFile(node.FramePath("dn-wafer", f), d),
                  $"cancel: {what}: the next frame is stored");
        }
        byte[] big = Synth.Bytes("dn-deadline", 4 << 20, 1);
        {
            using var call = client.PushFrames(deadline: In(0.5));
            StatusCode code = StatusCode.OK;
            try
            {
                await call.RequestStream.WriteAsync(Chunks("dn-deadline", big, 1 << 20, "dn-wafer").First());
                await call.ResponseStream.MoveNext(CancellationToken.None);
            }
            catch (RpcException e)
            {
                code = e.StatusCode;
            }
            Check(code == StatusCode.DeadlineExceeded, $"cancel: deadline mid-frame: DeadlineExceeded ({code})");
            await Afterwards("deadline");
            Check(!File.Exists(node.FramePath("dn-wafer", "dn-deadline")), "cancel: the partial frame is not stored");
        }
        {
            using var cts = new CancellationTokenSource();
            using var call = client.PushFrames(deadline: In(60), cancellationToken: cts.Token);
            StatusCode code = StatusCode.OK;
            try
            {
                foreach (FrameChunk ch in Chunks("dn-cancel", big, 1 << 20, "dn-wafer").Take(2))
                    await call.RequestStream.WriteAsync(ch);
                await WaitFor(async () => (await client.StatsAsync(new StatsRequest(), deadline: In(5))).FramesInFlight > 0, 5000);
                cts.Cancel();
                await call.ResponseStream.MoveNext(CancellationToken.None);
            }
            catch (RpcException e)
            {
                code = e.StatusCode;
            }
            Check(code == StatusCode.Cancelled, $"cancel: PushFrames cancelled mid-frame: Cancelled ({code})");
            await Afterwards("push cancel");
        }
        {
            var seedc = new SeedClientT(c.Channel);
            using var cts = new CancellationTokenSource();
            using var call = seedc.ControlStream(deadline: In(60), cancellationToken: cts.Token);
            int acks = 0;
            var writer = Task.Run(async () =>
            {
                try
                {
                    for (int i = 0; i < 20000 && !cts.IsCancellationRequested; i++)
                        await call.RequestStream.WriteAsync(new SeedMeta { FrameId = Guid.NewGuid().ToString(), Addr = 4096, Rkey = 7, Length = 4096 });
                }
                catch (Exception e) when (e is RpcException or OperationCanceledException or InvalidOperationException)
                {
                }
            });
            StatusCode code = StatusCode.OK;
            try
            {
                while (await call.ResponseStream.MoveNext(CancellationToken.None))
                {
                    if (++acks == 50)
                        cts.Cancel();
                }
            }
            catch (RpcException e)
            {
                code = e.StatusCode;
            }
            await writer.WaitAsync(TimeSpan.FromSeconds(10));
            Check(code == StatusCode.Cancelled && acks >= 50 && acks < 20000,
                  $"cancel: ControlStream cancelled mid-stream: Cancelled after {acks} Acks ({code})");
            await Afterwards("control cancel");
        }
    }

    private static async Task WaitFor(Func<Task<bool>> pred, int ms)
    {
        long end = Environment.TickCount64 + ms;
        while (Environment.TickCount64 < end)
        {
            try
            {
                if (await pred())
                    return;
            }
            catch (RpcException)
            {
            }
            await Task.Delay(50);
        }
    }

    private static async Task StatusCase(string url)
    {
        using Chan c = Open(url);
        var m = new Method<byte[], byte[]>(MethodType.Unary, "h3000.RDMASvc", "NoSuchMethod",
                                           Marshallers.Create(b => b, b => b), Marshallers.Create(b => b, b => b));
        StatusCode code = StatusCode.OK;
        try
        {
            await c.Channel.CreateCallInvoker().AsyncUnaryCall(m, null, new CallOptions(deadline: In(5)), []);
        }
        catch (RpcException e)
        {
            code = e.StatusCode;
        }
        Check(code == StatusCode.Unimplemented, $"status: an unknown method is Unimplemented ({code})");

        var client = new RDMASvc.RDMASvcClient(c.Channel);
        byte[] huge = new byte[5 << 20];
        var (_, st, det) = await Push(client, [new FrameChunk
        {
            FrameId = "dn-huge", Offset = 0, Last = true, Data = ByteString.CopyFrom(huge),
            Meta = new FrameMeta { FrameId = "dn-huge", Length = (ulong)huge.Length, WaferId = "dn-wafer" },
        }]);
        Check(st == StatusCode.ResourceExhausted, $"status: a 5 MiB message is ResourceExhausted, as the node says ({st} {det})");

        StatsReply s = await client.StatsAsync(new StatsRequest(), deadline: In(5));
        Check(s.Latency.Count > 0 && s.CalculateSize() < 4 << 20,
              $"status: Stats with {s.Latency.Count} histograms ({s.CalculateSize()} bytes) under .NET's 4 MB receive cap");
        Check(await Serving(c.Channel), "status: health SERVING afterwards");
    }

    private static async Task ManyCase(string url)
    {
        foreach (bool multi in new[] { true, false })
        {
            using Chan c = Open(url, multi);
            var client = new SeedClientT(c.Channel);
            const int N = 300;
            var calls = new List<AsyncDuplexStreamingCall<SeedMeta, SeedAck>>();
            var got = new int[N];
            var status = new StatusCode[N];
            var allAcked = new TaskCompletionSource();
            int acked = 0;
            var tasks = Enumerable.Range(0, N).Select(async i =>
            {
                var call = client.ControlStream(deadline: In(120));
                lock (calls) calls.Add(call);
                try
                {
                    await call.RequestStream.WriteAsync(new SeedMeta { FrameId = $"many-{multi}-{i}", Addr = 4096, Rkey = 7, Length = 4096 });
                    if (await call.ResponseStream.MoveNext(CancellationToken.None))
                    {
                        got[i]++;
                        if (Interlocked.Increment(ref acked) == N)
                            allAcked.TrySetResult();
                    }
                    // with several connections every stream stays open until all have their Ack
                    if (multi)
                        await allAcked.Task.WaitAsync(TimeSpan.FromSeconds(90));
                    await call.RequestStream.CompleteAsync();
                    while (await call.ResponseStream.MoveNext(CancellationToken.None))
                        got[i]++;
                    status[i] = call.GetStatus().StatusCode;
                }
                catch (RpcException e)
                {
                    status[i] = e.StatusCode;
                }
                catch (TimeoutException)
                {
                    status[i] = StatusCode.DeadlineExceeded;
                }
            }).ToList();
            await Task.WhenAll(tasks);
            foreach (var call in calls)
                call.Dispose();
            int served = Enumerable.Range(0, N).Count(i => got[i] == 1 && status[i] == StatusCode.OK);
            var bad = Enumerable.Range(0, N).Where(i => status[i] != StatusCode.OK).Select(i => status[i]).GroupBy(x => x)
                                .Select(g => $"{g.Key} x{g.Count()}");
            Check(served == N, $"many: {N} ControlStreams on one GrpcChannel, EnableMultipleHttp2Connections={multi}: {served} served " +
                               $"with one Ack each, on {c.Connections} connection(s) {string.Join(", ", bad)}");
            if (multi)
                Check(c.Connections >= 2, $"many: .NET opened a second connection past 256 streams ({c.Connections})");
        }
    }

    private static async Task TlsCase(bool mtls)
    {
        string what = mtls ? "mtls" : "tls";
        string dir = Path.Combine(Work, what);
        Pki pki = Pki.Create(dir);
        var args = new List<string> { "--pool", "1M:8", "--workers", "1", "--rdma", "off", "--tls-cert", pki.ServerPem, "--tls-key", pki.ServerKey };
        X509Certificate2? cert = null;
        if (mtls)
        {
            args.AddRange(["--tls-client-ca", pki.CaPem]);
            cert = pki.Issue("CN=dotnet-producer", Path.Combine(dir, "client.pem"), Path.Combine(dir, "client.key"), server: false);
        }
        await using IngestNode node = await IngestNode.StartAsync(dir, [.. args]);
        string url = "https://" + node.Address;
        using (Chan c = Open(url, trust: pki, clientCert: cert))
        {
            Check(await Serving(c.Channel), $"{what}: Health/Check over https:// with the test's CA{(mtls ? " and a client certificate" : "")}");
            byte[] d = Synth.Bytes("dn-" + what, 300000, 5);
            var (acks, st, det) = await Push(new RDMASvc.RDMASvcClient(c.Channel), Chunks("dn-" + what, d, 1 << 20, "dn-wafer"));
            Check(st == StatusCode.OK && acks.Count == 1 && acks[0].Stored && SameFile(node.FramePath("dn-wafer", "dn-" + what), d),
                  $"{what}: a frame pushed over TLS is stored byte-exact ({st} {det})");
        }
        Pki other = Pki.Create(Path.Combine(dir, "other"), "other");
        using (Chan c = Open(url, trust: mtls ? pki : other))
        {
            StatusCode code = StatusCode.OK;
            string why = "";
            try
            {
                await new Health.HealthClient(c.Channel).CheckAsync(new HealthCheckRequest(), deadline: In(10));
            }
            catch (RpcException e)
            {
                code = e.StatusCode;
                why = e.Status.Detail + " / " + e.Status.DebugException?.Message;
            }
            // the node refuses a client without a certificate: Unavailable (the handshake
            // fails). A client that rejects the node's certificate itself gets Internal from
            // Grpc.Net.Client ("The SSL connection could not be established"): .NET's
            // mapping of its own AuthenticationException, not the node's answer.
            Check(mtls ? code == StatusCode.Unavailable
                       : code == StatusCode.Internal && why.Contains("SSL connection could not be established", StringComparison.Ordinal),
                  $"{what}: {(mtls ? "no client certificate: refused at the handshake, Unavailable" : "a client that trusts another CA refuses the node: Internal, SSL")} ({code}: {why})");
        }
        Check(await node.StopAsync() == 0, $"{what}: ingestd exits 0");
    }

    private static async Task AuthCase()
    {
        string dir = Path.Combine(Work, "auth");
        Directory.CreateDirectory(dir);
        string token = "dotnet-" + Guid.NewGuid().ToString("N");
        string tf = Path.Combine(dir, "token");
        File.WriteAllText(tf, token + "\n");
        File.SetUnixFileMode(tf, UnixFileMode.UserRead | UnixFileMode.UserWrite);
        await using IngestNode node = await IngestNode.StartAsync(dir, "--pool", "1M:8", "--workers", "1", "--rdma", "off",
                                                                  "--auth-token-file", tf);
        using Chan c = Open("http://" + node.Address);
        var client = new RDMASvc.RDMASvcClient(c.Channel);
        var seedc = new SeedClientT(c.Channel);
        SeedClient.SeedProducer.Result r = await SeedClient.SeedProducer.SendAsync(seedc, [Guid.NewGuid().ToString()]);
        Check(r.Status == StatusCode.Unauthenticated, $"auth: a seed stream without a session: Unauthenticated ({r.Status} {r.Detail})");
        StatusCode bad = StatusCode.OK;
        try
        {
            await client.NegotiateAsync(new NegotiateRequest { VersionMin = 1, VersionMax = 1, AuthToken = "wrong-token-0123456789" }, deadline: In(10));
        }
        catch (RpcException e)
        {
            bad = e.StatusCode;
        }
        Check(bad == StatusCode.Unauthenticated, $"auth: Negotiate with a wrong token: Unauthenticated ({bad})");
        NegotiateReply n = await client.NegotiateAsync(new NegotiateRequest
        {
            VersionMin = 1, VersionMax = 1, AuthToken = token, ClientName = "dotnet-interop", Transports = { Transport.GrpcStream },
        }, deadline: In(10));
        var md = new Metadata { { "h3000-session-id", n.SessionId.ToString(System.Globalization.CultureInfo.InvariantCulture) } };
        byte[] d = Synth.Bytes("dn-auth", 200000, 9);
        var (acks, st, det) = await Push(client, Chunks("dn-auth", d, (int)n.MaxChunkSize, "dn-wafer"), md);
        Check(n.SessionId != 0 && st == StatusCode.OK && acks.Count == 1 && acks[0].Stored && SameFile(node.FramePath("dn-wafer", "dn-auth"), d),
              $"auth: Negotiate with the token, then PushFrames naming its session in h3000-session-id: stored ({st} {det})");
        using var call = seedc.ControlStream(new Metadata { { "h3000-session-id", n.SessionId.ToString(System.Globalization.CultureInfo.InvariantCulture) } }, deadline: In(30));
        await call.RequestStream.WriteAsync(new SeedMeta { FrameId = Guid.NewGuid().ToString(), Addr = 4096, Rkey = 7, Length = 4096 });
        bool one = await call.ResponseStream.MoveNext(CancellationToken.None);
        string msg = one ? call.ResponseStream.Current.Msg : "no Ack";
        await call.RequestStream.CompleteAsync();
        while (await call.ResponseStream.MoveNext(CancellationToken.None)) { }
        Check(one && call.GetStatus().StatusCode == StatusCode.OK, $"auth: a seed ControlStream naming the session is served ({msg})");
        Check(await node.StopAsync() == 0, "auth: ingestd exits 0");
    }

    private static async Task PingCase(string url, double minutes)
    {
        await Task.Yield();
        using Chan c = Open(url, pingEvery: TimeSpan.FromSeconds(1));
        var client = new SeedClientT(c.Channel);
        using var call = client.ControlStream(deadline: In(minutes * 60 + 120));
        int sent = 0, acks = 0;
        var sw = Stopwatch.StartNew();
        StatusCode code = StatusCode.OK;
        try
        {
            while (sw.Elapsed.TotalMinutes < minutes)
            {
                await call.RequestStream.WriteAsync(new SeedMeta { FrameId = Guid.NewGuid().ToString(), Addr = 4096, Rkey = 7, Length = 4096 });
                sent++;
                using var cts = new CancellationTokenSource(30000);
                if (await call.ResponseStream.MoveNext(cts.Token))
                    acks++;
                await Task.Delay(5000);
            }
            await call.RequestStream.CompleteAsync();
            while (await call.ResponseStream.MoveNext(CancellationToken.None))
                acks++;
            code = call.GetStatus().StatusCode;
        }
        catch (RpcException e)
        {
            code = e.StatusCode;
        }
        Check(code == StatusCode.OK && acks == sent && sent > 0,
              $"ping: a ControlStream open {sw.Elapsed.TotalMinutes:F1} min with PINGs every second: {acks} Acks for {sent} frames, status {code}");
        bool serving = await Serving(c.Channel);
        Check(serving && c.Connections == 1,
              $"ping: the channel is still on its first connection (no GOAWAY, no reconnect): {c.Connections} connection(s)");
    }

    private static async Task StopCase(IngestNode node, string url)
    {
        using Chan c = Open(url);
        var seedc = new SeedClientT(c.Channel);
        using var call = seedc.ControlStream(deadline: In(60));
        await call.RequestStream.WriteAsync(new SeedMeta { FrameId = Guid.NewGuid().ToString(), Addr = 4096, Rkey = 7, Length = 4096 });
        bool acked = await call.ResponseStream.MoveNext(CancellationToken.None);
        node.Signal(15);
        StatusCode code = StatusCode.OK;
        string detail = "";
        try
        {
            while (await call.ResponseStream.MoveNext(CancellationToken.None)) { }
            code = call.GetStatus().StatusCode;
            detail = call.GetStatus().Detail;
        }
        catch (RpcException e)
        {
            code = e.StatusCode;
            detail = e.Status.Detail + (e.Status.DebugException != null ? " / " + e.Status.DebugException.Message : "");
        }
        Check(acked && code == StatusCode.Unavailable && !detail.Contains("reset", StringComparison.OrdinalIgnoreCase),
              $"stop: an open ControlStream at SIGTERM ends Unavailable, not a reset ({code}: {detail})");
        StatusCode after = StatusCode.OK;
        try
        {
            await new Health.HealthClient(c.Channel).CheckAsync(new HealthCheckRequest(), deadline: In(5));
        }
        catch (RpcException e)
        {
            after = e.StatusCode;
        }
        Check(after == StatusCode.Unavailable, $"stop: a new call after GOAWAY is Unavailable ({after})");
        Check(await node.StopAsync() == 0, "stop: ingestd exits 0");
    }
}
