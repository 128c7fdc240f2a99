// SPDX-License-Identifier: Apache-2.0
//
// dotnet-send: synthetic frames from C#, as ingest-send sends them, to compare the two
// against the same ingestd (bench/dotnet.sh) and to prove RDMA from C# in the Soft-RoCE
// guest (tests/rxe/dotnet_in_guest.sh).
//
//   DotnetSend --server HOST:PORT [--transport auto|rdma|rdma-write|grpc|grpc-net]
//              [--count N] [--size BYTES] [--seed S] [--wafer ID] [--id-prefix P]
//              [--credits N] [--buffers N] [--manifest PATH] [--reuse-buffers] [--warmup N]
//              [--async] [--recycle-on received|durable] [--then OPTIONS...]...
//
// auto/rdma/rdma-write/grpc go through H3000.Ingest (libingest); grpc-net is a pure
// Grpc.Net.Client producer (Negotiate, then PushFrames in maxChunkSize chunks with at most
// `credits` frames unacknowledged). Frame content: producer/synth.h of the frame id and
// seed (what ingest-verify regenerates from --manifest), or with --reuse-buffers each
// buffer's bytes made once and resent under new ids (the generator out of the
// measurement, as ingest-send --reuse-buffers). Prints one JSON line: frames, ok, failed,
// bytes, wall_s (first submit to last final ack), mib_s, transport, and for H3000.Ingest
// alloc_bytes_per_frame (GC.GetAllocatedBytesForCurrentThread over the frames after the
// first `buffers`, the steady path). --warmup N: N frames (wafer "<wafer>-warmup") sent
// and acknowledged before the clock starts, so the JIT's first compilations are not in
// the figure. --async: SubmitAsync on this task while another task reads ReadAcksAsync
// and hands each returned buffer back (the library's pump thread drives the connection);
// its allocations are every thread's (GC.GetTotalAllocatedBytes), the pump's included.
// --recycle-on: the stage that returns a buffer (ProducerOptions.RecycleOn; the library's
// default when not given). --then: what follows is another run (all its options, none
// inherited), after this one, in the same process (one .NET start: slow under qemu TCG).
// Exit 0 when every frame of every run is stored.
using System.Diagnostics;
using System.Globalization;
using System.Text.Json;
using System.Threading.Channels;
using Google.Protobuf;
using Grpc.Core;
using Grpc.Net.Client;
using H3000.Ingest;
using H3000.TestCommon;
using Proto = H3000.Ingest.Protocol;

namespace DotnetSend;

internal static class Program
{
    private sealed class Opts
    {
        public string Server = "127.0.0.1:50051", Transport = "auto", Wafer = "dotnet-send", Prefix = "frame-";
        public int Count = 100, Size = 4 << 20, Credits, Buffers = 16, Warmup;
        public ulong Seed = 1;
        public string? Manifest;
        public bool Reuse, Async;
        public string? RecycleOn;
    }

    public static async Task<int> Main(string[] args)
    {
        // RUN [--then RUN]...: each RUN a whole option set, run in turn in this one process
        // (a .NET start costs tens of seconds under qemu TCG: the Soft-RoCE guest test sends
        // over both RDMA transports from one start); one JSON line a run, and the first
        // failing run's status (the later runs still run)
        var runs = new List<Opts>();
        var o = new Opts();
        for (int i = 0; i < args.Length; i++)
        {
            string Next() => i + 1 < args.Length ? args[++i] : throw new ArgumentException($"{args[i]} needs a value");
            switch (args[i])
            {
                case "--then": runs.Add(o); o = new Opts(); break;
                case "--server": o.Server = Next(); break;
                case "--transport": o.Transport = Next(); break;
                case "--count": o.Count = int.Parse(Next(), CultureInfo.InvariantCulture); break;
                case "--size": o.Size = int.Parse(Next(), CultureInfo.InvariantCulture); break;
                case "--seed": o.Seed = ulong.Parse(Next(), CultureInfo.InvariantCulture); break;
                case "--wafer": o.Wafer = Next(); break;
                case "--id-prefix": o.Prefix = Next(); break;
                case "--credits": o.Credits = int.Parse(Next(), CultureInfo.InvariantCulture); break;
                case "--buffers": o.Buffers = int.Parse(Next(), CultureInfo.InvariantCulture); break;
                case "--manifest": o.Manifest = Next(); break;
                case "--reuse-buffers": o.Reuse = true; break;
                case "--warmup": o.Warmup = int.Parse(Next(), CultureInfo.InvariantCulture); break;
                case "--async": o.Async = true; break;
                case "--recycle-on": o.RecycleOn = Next(); break;
                default:
                    Console.Error.WriteLine($"DotnetSend: unknown option {args[i]}");
                    return 2;
            }
        }
        runs.Add(o);
        if (runs.Exists(r => r.Reuse && r.Manifest != null))
        {
            Console.Error.WriteLine("DotnetSend: --reuse-buffers sends bytes that are not the synthetic frames: no --manifest");
            return 2;
        }
        int rc = 0;
        foreach (var r in runs)
        {
            int one = await Run(r);
            if (rc == 0)
                rc = one;
        }
        return rc;
    }

    private static async Task<int> Run(Opts o)
    {
        try
        {
            return o.Transport == "grpc-net" ? await GrpcNet(o) : o.Async ? await IngestAsync(o) : Ingest(o);
        }
        catch (IngestException e)
        {
            Console.Error.WriteLine($"DotnetSend: {e.Message}{(e.Retryable ? " (retryable)" : "")}");
            return 1;
        }
    }

    // the process's CPU time (every thread: the pump's, .NET's own) over the measured window
    private static double CpuSeconds() => Process.GetCurrentProcess().TotalProcessorTime.TotalSeconds;

    private static void Report(Opts o, string transport, int ok, int failed, long bytes, double wall, double allocPerFrame,
                               long allocBytes = -1, int allocFrames = 0, double cpu = -1)
    {
        Console.WriteLine(JsonSerializer.Serialize(new Dictionary<string, object>
        {
            ["frames"] = o.Count, ["ok"] = ok, ["failed"] = failed, ["bytes"] = bytes,
            ["wall_s"] = Math.Round(wall, 3), ["mib_s"] = Math.Round(bytes / wall / (1 << 20), 1),
            ["transport"] = transport, ["alloc_bytes_per_frame"] = Math.Round(allocPerFrame, 2),
            ["alloc_bytes"] = allocBytes, ["alloc_frames"] = allocFrames,
            ["cpu_s"] = Math.Round(cpu, 3), ["cpu_s_per_gib"] = cpu < 0 || bytes == 0 ? -1 : Math.Round(cpu / (bytes / (double)(1L << 30)), 3),
        }));
    }

    // ------------------------------------------------------------ through H3000.Ingest

    private static ProducerOptions Options(Opts o)
    {
        var po = new ProducerOptions
        {
            Server = o.Server,
            Transport = o.Transport switch
            {
                "auto" => Transport.Auto,
                "rdma" => Transport.Rdma,
                "rdma-write" => Transport.RdmaWrite,
                "grpc" => Transport.Grpc,
                _ => throw new ArgumentException($"unknown transport {o.Transport}"),
            },
            Credits = o.Credits,
            PoolFrames = o.Buffers,
            PoolFrameSize = o.Size,
            FrameTimeout = TimeSpan.FromMinutes(5),
            ClientName = "dotnet-send",
        };
        return o.RecycleOn switch
        {
            null => po,
            "received" => po with { RecycleOn = AckStage.Received },
            "durable" => po with { RecycleOn = AckStage.Durable },
            _ => throw new ArgumentException($"--recycle-on {o.RecycleOn}: received or durable"),
        };
    }

    private static string TransportName(Producer p, Opts o) =>
        p.ActualTransport == Transport.Rdma ? (o.Transport == "rdma-write" ? "rdma-write" : "rdma") : "grpc";

    // --reuse-buffers: each buffer's bytes made once, and their CRC-32C kept and declared
    // with every frame sent from it (as ingest-send does), so neither side of the bench
    // recomputes what it already knows
    private static Dictionary<FrameBuffer, uint> Rent(Producer p, Opts o, List<FrameBuffer> into)
    {
        var crcOf = new Dictionary<FrameBuffer, uint>();
        for (int i = 0; i < o.Buffers; i++)
        {
            FrameBuffer b = p.Rent(o.Size);
            into.Add(b);
            if (o.Reuse)
            {
                Synth.Fill(b.Memory.Span, (ulong)b.GetHashCode(), o.Seed);
                crcOf[b] = Producer.Crc32c(b.Memory.Span[..o.Size]);
            }
        }
        return crcOf;
    }

    private static int Ingest(Opts o)
    {
        using Producer p = Producer.Connect(Options(o));
        string transport = TransportName(p, o);
        var rented = new List<FrameBuffer>();
        Dictionary<FrameBuffer, uint> crcOf = Rent(p, o, rented);
        var free = new Stack<FrameBuffer>(rented);
        string[] ids = Enumerable.Range(0, o.Count).Select(i => o.Prefix + i.ToString(CultureInfo.InvariantCulture)).ToArray();
        var manifest = new List<(string, string, long, uint)>();
        var acks = new Ack[64];
        for (int w = 0; w < o.Warmup; w++)
        {
            FrameBuffer b = free.Pop();
            p.Submit(b, o.Size, "warmup-" + w.ToString(CultureInfo.InvariantCulture), o.Wafer + "-warmup");
            while (p.InFlight > 0)
            {
                int k = p.Poll(acks, TimeSpan.FromMilliseconds(100));
                for (int i = 0; i < k; i++)
                    if (acks[i].ReturnsBuffer)
                        free.Push(acks[i].Buffer!);
            }
        }
        int next = 0, ok = 0, failed = 0;
        long bytes = 0, allocStart = 0;
        int allocFrom = Math.Min(o.Buffers, o.Count / 2);
        double cpu0 = CpuSeconds();
        var sw = Stopwatch.StartNew();
        while (ok + failed < o.Count)
        {
            while (next < o.Count && free.Count > 0)
            {
                FrameBuffer b = free.Peek();
                if (!o.Reuse)
                    Synth.Fill(b.Memory.Span, Synth.Key(ids[next]), o.Seed);
                uint? crc = o.Reuse ? crcOf[b] : o.Manifest != null ? Producer.Crc32c(b.Memory.Span[..o.Size]) : null;
                if (!p.TrySubmit(b, o.Size, ids[next], o.Wafer, crc32c: crc))
                    break;
                if (o.Manifest != null)
                    manifest.Add((ids[next], o.Wafer, o.Size, crc.GetValueOrDefault()));
                free.Pop();
                if (++next == allocFrom)
                    allocStart = GC.GetAllocatedBytesForCurrentThread();
            }
            int n = p.Poll(acks, TimeSpan.FromMilliseconds(100));
            for (int i = 0; i < n; i++)
            {
                ref Ack a = ref acks[i];
                if (a.Stored)
                {
                    ok++;
                    bytes += o.Size;
                }
                else if (a.IsFinal)
                {
                    failed++;
                    Console.Error.WriteLine($"DotnetSend: {a}");
                }
                if (a.ReturnsBuffer)
                    free.Push(a.Buffer!);
            }
        }
        double wall = sw.Elapsed.TotalSeconds;
        long alloc = GC.GetAllocatedBytesForCurrentThread() - allocStart;
        double cpu = CpuSeconds() - cpu0;   // after the allocation figure: it allocates
        if (o.Manifest != null)
            Synth.WriteManifest(o.Manifest, manifest, o.Seed);
        Report(o, transport, ok, failed, bytes, wall, (double)alloc / Math.Max(1, o.Count - allocFrom), alloc, o.Count - allocFrom, cpu);
        return failed == 0 && ok == o.Count ? 0 : 1;
    }

    // ------------------------------------------------- H3000.Ingest, SubmitAsync + ReadAcksAsync

    private static async Task<int> IngestAsync(Opts o)
    {
        if (o.Manifest != null)
            throw new ArgumentException("--async: no --manifest (use the Poll loop)");
        await using Producer p = await Producer.ConnectAsync(Options(o));
        string transport = TransportName(p, o);
        // buffers go back through a channel the ack reader writes (the async program's shape)
        var free = Channel.CreateBounded<FrameBuffer>(new BoundedChannelOptions(o.Buffers) { SingleReader = true, SingleWriter = true });
        var rented = new List<FrameBuffer>();
        Dictionary<FrameBuffer, uint> crcOf = Rent(p, o, rented);
        foreach (FrameBuffer b in rented)
            free.Writer.TryWrite(b);
        string[] ids = Enumerable.Range(0, o.Count).Select(i => o.Prefix + i.ToString(CultureInfo.InvariantCulture)).ToArray();
        int ok = 0, failed = 0, warmupDone = 0;
        using var warm = new SemaphoreSlim(0);
        Task reader = Task.Run(async () =>
        {
            await foreach (Ack a in p.ReadAcksAsync())
            {
                if (a.ReturnsBuffer)
                    free.Writer.TryWrite(a.Buffer!);
                if (!a.IsFinal)
                    continue;
                if (warmupDone < o.Warmup)
                {
                    warmupDone++;
                    warm.Release();
                    continue;
                }
                if (a.Stored)
                    ok++;
                else
                {
                    failed++;
                    await Console.Error.WriteLineAsync($"DotnetSend: {a}").ConfigureAwait(false);
                }
                if (ok + failed == o.Count)
                    break;
            }
        });
        for (int w = 0; w < o.Warmup; w++)
        {
            FrameBuffer b = await free.Reader.ReadAsync();
            await p.SubmitAsync(b, o.Size, "warmup-" + w.ToString(CultureInfo.InvariantCulture), o.Wafer + "-warmup",
                                crc32c: o.Reuse ? crcOf[b] : null);
            await warm.WaitAsync();
        }
        int allocFrom = Math.Min(o.Buffers, o.Count / 2);
        long allocStart = 0;
        double cpu0 = CpuSeconds();
        var sw = Stopwatch.StartNew();
        for (int next = 0; next < o.Count; next++)
        {
            FrameBuffer b = await free.Reader.ReadAsync();
            if (!o.Reuse)
                Synth.Fill(b.Memory.Span, Synth.Key(ids[next]), o.Seed);
            await p.SubmitAsync(b, o.Size, ids[next], o.Wafer, crc32c: o.Reuse ? crcOf[b] : null);
            if (next + 1 == allocFrom)
                allocStart = GC.GetTotalAllocatedBytes(precise: true);
        }
        await reader;
        double wall = sw.Elapsed.TotalSeconds;
        long alloc = GC.GetTotalAllocatedBytes(precise: true) - allocStart;
        double cpu = CpuSeconds() - cpu0;   // after the allocation figure: it allocates
        Report(o, transport + "-async", ok, failed, (long)ok * o.Size, wall, (double)alloc / Math.Max(1, o.Count - allocFrom),
               alloc, o.Count - allocFrom, cpu);
        return failed == 0 && ok == o.Count ? 0 : 1;
    }

    // ------------------------------------------------------------ pure Grpc.Net.Client

    private static async Task<int> GrpcNet(Opts o)
    {
        using var channel = GrpcChannel.ForAddress("http://" + o.Server, new GrpcChannelOptions
        {
            HttpHandler = new SocketsHttpHandler { EnableMultipleHttp2Connections = true },
        });
        var client = new Proto.RDMASvc.RDMASvcClient(channel);
        Proto.NegotiateReply n = await client.NegotiateAsync(new Proto.NegotiateRequest
        {
            VersionMin = 1, VersionMax = 1, ClientName = "dotnet-send grpc-net", Credits = (uint)o.Credits,
            Transports = { Proto.Transport.GrpcStream },
        }, deadline: DateTime.UtcNow.AddSeconds(10));
        int credits = (int)n.Credits, chunk = (int)n.MaxChunkSize;
        var md = new Metadata { { "h3000-session-id", n.SessionId.ToString(CultureInfo.InvariantCulture) } };
        using var call = client.PushFrames(md, deadline: DateTime.UtcNow.AddHours(1));
        int nbuf = Math.Max(1, Math.Min(o.Buffers, credits));
        var bufs = Enumerable.Range(0, nbuf).Select(_ => new byte[o.Size]).ToArray();
        if (o.Reuse)
            for (int i = 0; i < nbuf; i++)
                Synth.Fill(bufs[i], (ulong)i, o.Seed);
        // a buffer goes back when its frame's final ack came
        var freeBufs = Channel.CreateUnbounded<int>();
        for (int i = 0; i < nbuf; i++)
            freeBufs.Writer.TryWrite(i);
        var bufOf = new Dictionary<string, int>();
        var manifest = new List<(string, string, long, uint)>();
        int ok = 0, failed = 0;
        long bytes = 0;
        double cpu0 = CpuSeconds();
        var sw = Stopwatch.StartNew();
        var reader = Task.Run(async () =>
        {
            await foreach (Proto.Ack a in call.ResponseStream.ReadAllAsync())
            {
                bool final = a.Stored || !a.Ok;
                if (!final)
                    continue;
                if (a.Stored) { ok++; bytes += o.Size; }
                else { failed++; Console.Error.WriteLine($"DotnetSend: {a.FrameId}: {a.Code}: {a.Msg}"); }
                int bi;
                lock (bufOf) { bi = bufOf[a.FrameId]; bufOf.Remove(a.FrameId); }
                freeBufs.Writer.TryWrite(bi);
                if (ok + failed == o.Count)
                    break;
            }
        });
        for (int f = 0; f < o.Count; f++)
        {
            int bi = await freeBufs.Reader.ReadAsync();
            string id = o.Prefix + f.ToString(CultureInfo.InvariantCulture);
            byte[] data = bufs[bi];
            if (!o.Reuse)
                Synth.Fill(data, Synth.Key(id), o.Seed);
            if (o.Manifest != null)
                manifest.Add((id, o.Wafer, o.Size, Producer.Crc32c(data)));
            lock (bufOf) bufOf[id] = bi;
            for (int off = 0; off < data.Length; off += chunk)
            {
                int len = Math.Min(chunk, data.Length - off);
                var c = new Proto.FrameChunk
                {
                    FrameId = id, Offset = (ulong)off, Last = off + len >= data.Length,
                    Data = UnsafeByteOperations.UnsafeWrap(data.AsMemory(off, len)),
                };
                if (off == 0)
                    c.Meta = new Proto.FrameMeta { FrameId = id, WaferId = o.Wafer, Length = (ulong)data.Length };
                await call.RequestStream.WriteAsync(c);
            }
        }
        await reader;
        double wall = sw.Elapsed.TotalSeconds, cpu = CpuSeconds() - cpu0;
        await call.RequestStream.CompleteAsync();
        if (o.Manifest != null)
            Synth.WriteManifest(o.Manifest, manifest, o.Seed);
        Report(o, "grpc-net", ok, failed, bytes, wall, -1, cpu: cpu);   // allocations not measured: the writer runs on pool threads
        return failed == 0 && ok == o.Count ? 0 : 1;
    }
}
