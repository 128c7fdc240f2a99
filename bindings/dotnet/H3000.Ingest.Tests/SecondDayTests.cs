// SPDX-License-Identifier: Apache-2.0
using System.Net;
using System.Net.Sockets;
using System.Runtime;
using H3000.TestCommon;
using Microsoft.Extensions.Logging;

namespace H3000.Ingest.Tests;

/// <summary>
/// What a C# producer team hits on its first day: a node restart under <c>Server =</c>,
/// dispose racing writer tasks, the async recycling program (RentAsync), libingest's log
/// lines in an ILogger, the address forms, error codes and a cancellable connect.
/// </summary>
public class SecondDayTests
{
    private const ulong Seed = 42;
    private static int OpenFds() => Directory.GetFiles("/proc/self/fd").Length;

    private static (int Len, uint Crc) Fill(FrameBuffer b, string id, int len)
    {
        Span<byte> s = b.Memory.Span[..len];
        Synth.Fill(s, Synth.Key(id), Seed);
        return (len, Producer.Crc32c(s));
    }

    private static void Verify(IngestNode node, string wafer, List<(string, string, long, uint)> frames)
    {
        string man = Path.Combine(node.DataDir, "..", "manifest-" + wafer);
        Synth.WriteManifest(man, frames, Seed);
        var (rc, output) = Support.Run(IngestNode.App("ingest-verify"), "--data-dir", node.DataDir, "--manifest", man);
        Assert.True(rc == 0, "ingest-verify: " + output);
        // the catalog: one row per frame, however often it was sent
        var (prc, rows) = Support.Run("/usr/bin/python3", "-c",
            "import sqlite3,sys; d=sqlite3.connect('file:'+sys.argv[1]+'?mode=ro', uri=True); " +
            "print(*d.execute('select count(*), count(distinct frame_id) from frames where wafer_id=?', (sys.argv[2],)).fetchone())",
            Path.Combine(node.DataDir, "catalog.db"), wafer);
        Assert.True(prc == 0, rows);
        Assert.Equal($"{frames.Count} {frames.Count}", rows.Trim());
    }

    /// <summary>
    /// Server = one node, the async program (RentAsync, SubmitAsync, ReadAcksAsync that
    /// releases what its acks return); the node is killed (-9) or stopped (SIGTERM) mid-run
    /// and started again on its port and data dir: every frame stored once, none failed.
    /// </summary>
    [Theory]
    [InlineData(9)]
    [InlineData(15)]
    public async Task A_node_restart_costs_a_single_server_producer_no_frame(int signal)
    {
        string dir = Support.Work("restart" + signal);
        string[] args = ["--pool", "256K:16,1M:16", "--workers", "1", "--rdma", "off"];
        IngestNode node = await IngestNode.StartAsync(dir, args);
        string wafer = "cs-restart" + signal;
        const int N = 200;
        var frames = new List<(string, string, long, uint)>();
        var stored = new HashSet<string>();
        var failed = new List<Ack>();
        await using (Producer p = Producer.Connect(Support.Grpc(node) with
        {
            ReconnectTimeout = TimeSpan.FromMinutes(2),
            FrameTimeout = TimeSpan.FromMinutes(3),
        }))
        {
            int durable = 0;
            Task reader = Task.Run(async () =>
            {
                await foreach (Ack a in p.ReadAcksAsync())
                {
                    if (a.ReturnsBuffer)
                        a.Buffer.Release();
                    if (a.Stored)
                        lock (stored) { stored.Add(a.FrameId); durable++; }
                    else if (!a.Ok)
                        lock (failed) failed.Add(a);
                    if (a.IsFinal && Volatile.Read(ref durable) + failed.Count == N)
                        return;
                }
            });
            for (int i = 0; i < N; i++)
            {
                string id = $"r{i}";
                FrameBuffer b = await p.RentAsync(64 << 10);
                var (len, crc) = Fill(b, id, 64 << 10);
                frames.Add((id, wafer, len, crc));
                await p.SubmitAsync(b, len, id, wafer, crc32c: crc);
                if (i == N / 3)
                {
                    // mid-run: the node goes, the producer keeps taking frames
                    if (signal == 9)
                        await node.KillAsync();
                    else
                        Assert.Equal(0, await node.StopAsync());
                    string addr = node.Address;
                    await node.DisposeAsync();
                    node = await IngestNode.StartOnAsync(dir, addr, args);
                }
            }
            Task done = await Task.WhenAny(reader, Task.Delay(TimeSpan.FromMinutes(4)));
            Assert.True(done == reader, "acks of every frame within 4 minutes (watchdog)");
            await reader;
            Assert.Empty(failed);
            Assert.Equal(N, stored.Count);
            ProducerStats st = p.GetStats();
            Assert.True(st.Failovers >= 1, "the lost connection is counted");
        }
        Verify(node, wafer, frames);
        await node.DisposeAsync();
    }

    /// <summary>
    /// Dispose from outside while four writer tasks fill rented buffers, an ack reader runs
    /// and compacting GCs are forced, 20 rounds: every race ends in ObjectDisposedException
    /// (or the other documented exceptions), never a crash; no buffer, slot or fd leaked.
    /// </summary>
    [Fact]
    public async Task Dispose_racing_writer_tasks_never_crashes_and_leaks_nothing()
    {
        await using IngestNode node = await Support.Node("dispose-race");
        await using (Producer w = Producer.Connect(Support.Grpc(node))) { }
        int fds0 = OpenFds();
        var rnd = new Random(5);
        int odes = 0;
        for (int round = 0; round < 20; round++)
        {
            Producer p = Producer.Connect(Support.Grpc(node) with { DrainTimeout = TimeSpan.Zero });
            using var stop = new CancellationTokenSource();
            var unexpected = new List<Exception>();
            Task reader = Task.Run(async () =>
            {
                try
                {
                    await foreach (Ack a in p.ReadAcksAsync())
                        if (a.ReturnsBuffer)
                            a.Buffer.Release();
                }
                catch (Exception e) when (e is ObjectDisposedException or IngestException or OperationCanceledException)
                {
                }
            });
            Task[] writers = Enumerable.Range(0, 4).Select(t => Task.Run(async () =>
            {
                for (int i = 0; ; i++)
                {
                    FrameBuffer? b = null;
                    try
                    {
                        b = await p.RentAsync(256 << 10, stop.Token);
                        Span<byte> s = b.Memory.Span;
                        // a long fill, yielding between slices: the dispose lands in the middle
                        for (int k = 0; k < s.Length; k += 4096)
                        {
                            s.Slice(k, 4096).Fill((byte)(i + k));
                            if ((k & 0xffff) == 0)
                                Thread.Yield();
                        }
                        await p.SubmitAsync(b, b.Length, $"w{round}-{t}-{i}", "cs-race", cancellationToken: stop.Token);
                        b = null;   // the library's until its ack returns it
                    }
                    catch (Exception e) when (e is ObjectDisposedException or OperationCanceledException or IngestException)
                    {
                        if (e is ObjectDisposedException)
                            Interlocked.Increment(ref odes);
                        return;
                    }
                    catch (Exception e)
                    {
                        lock (unexpected) unexpected.Add(e);
                        return;
                    }
                    finally
                    {
                        b?.Release();
                    }
                }
            })).ToArray();
            Task gc = Task.Run(() =>
            {
                while (!stop.IsCancellationRequested)
                {
                    GCSettings.LargeObjectHeapCompactionMode = GCLargeObjectHeapCompactionMode.CompactOnce;
                    GC.Collect(2, GCCollectionMode.Forced, blocking: true, compacting: true);
                    Thread.Sleep(5);
                }
            });
            await Task.Delay(rnd.Next(20, 300));
            await p.DisposeAsync();                       // from outside, as a host's shutdown does
            await Task.WhenAll(writers).WaitAsync(TimeSpan.FromMinutes(1));
            stop.Cancel();
            await gc;
            await reader.WaitAsync(TimeSpan.FromMinutes(1));
            Assert.Empty(unexpected);
            Assert.Equal(0, p.RentedCount);               // every buffer given back
            Assert.True(p.HandleClosed, "the native producer closed once the last buffer was released");
        }
        Assert.True(odes > 0, "some writer saw the dispose as ObjectDisposedException");
        Assert.True(OpenFds() <= fds0 + 2, $"file descriptors: {fds0} before 20 rounds, {OpenFds()} after");
        Assert.True(await Support.NodeIdle(node), "the node has every pool slot back");
    }

    /// <summary>A buffer rented before the dispose: its span stays valid memory; GetSpan then throws.</summary>
    [Fact]
    public async Task A_span_held_across_dispose_writes_into_mapped_memory()
    {
        await using IngestNode node = await Support.Node("span-dispose");
        Producer p = Producer.Connect(Support.Grpc(node));
        FrameBuffer b = p.Rent(256 << 10);
        Memory<byte> m = b.Memory;
        await p.DisposeAsync();
        Assert.False(p.HandleClosed);                     // the buffer keeps the pool mapped
        unsafe
        {
            using System.Buffers.MemoryHandle h = m.Pin();   // a pointer the app took before
            new Span<byte>(h.Pointer, 256 << 10).Fill(0x5a);  // no crash: still mapped
        }
        Assert.Throws<ObjectDisposedException>(() => b.Memory.Span[0] = 1);
        b.Release();
        Assert.True(p.HandleClosed);
        Assert.Equal(0, p.RentedCount);
    }

    /// <summary>The async recycling program of docs/CSHARP.md: more frames than buffers, no "no buffer free".</summary>
    [Fact]
    public async Task RentAsync_recycles_through_the_ack_reader()
    {
        await using IngestNode node = await Support.Node("rentasync");
        const int N = 120;
        var frames = new List<(string, string, long, uint)>();
        await using (Producer p = Producer.Connect(Support.Grpc(node) with { PoolFrames = 4 }))
        {
            int finals = 0, storedN = 0;
            Task reader = Task.Run(async () =>
            {
                await foreach (Ack a in p.ReadAcksAsync())
                {
                    if (a.ReturnsBuffer)
                        a.Buffer.Release();            // back to the pool: a RentAsync waiting gets it
                    if (a.IsFinal)
                    {
                        storedN += a.Stored ? 1 : 0;
                        if (++finals == N)
                            return;
                    }
                }
            });
            for (int i = 0; i < N; i++)
            {
                string id = $"ra{i}";
                FrameBuffer b = await p.RentAsync(100000);
                var (len, crc) = Fill(b, id, 100000);
                frames.Add((id, "cs-rentasync", len, crc));
                await p.SubmitAsync(b, len, id, "cs-rentasync");
            }
            await reader.WaitAsync(TimeSpan.FromMinutes(2));
            Assert.Equal(N, storedN);
            Assert.Equal(0, p.RentedCount);
            await Assert.ThrowsAsync<ArgumentOutOfRangeException>(async () => await p.RentAsync(1 << 30));
        }
        Verify(node, "cs-rentasync", frames);
    }

    private sealed class ListLogger : ILogger
    {
        public List<(LogLevel Level, string Text)> Lines { get; } = [];
        public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;
        public bool IsEnabled(LogLevel logLevel) => logLevel >= LogLevel.Information;
        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
        {
            lock (Lines)
                Lines.Add((logLevel, formatter(state, exception)));
        }
    }

    /// <summary>libingest's warnings reach the producer's ILogger with their level.</summary>
    /// <summary>
    /// SubmitAsync + ReadAcksAsync with credits to spare (fewer buffers than credits: no
    /// submit ever waits) and short of them (more buffers: SubmitAsync waits for credits
    /// over and over while the pump sleeps in libingest's poll). Every frame is stored, and
    /// neither semaphore ever holds more than one permit: they were signalled per ack batch
    /// and per submit whether anyone waited or not, so a busy hour left thousands behind
    /// that turned a later credit wait into a spin waking the pump each turn (and 2^31 of
    /// them throw SemaphoreFullException).
    /// </summary>
    [Theory]
    [InlineData(16, 4)]
    [InlineData(2, 8)]
    public async Task SubmitAsync_keeps_no_semaphore_permits_behind(int credits, int buffers)
    {
        await using IngestNode node = await Support.Node($"credits{credits}");
        const int N = 400, Len = 64 << 10;
        string wafer = $"cs-credits{credits}";
        var frames = new List<(string, string, long, uint)>();
        await using (Producer p = Producer.Connect(Support.Grpc(node) with { PoolFrames = buffers, Credits = credits }))
        {
            Assert.Equal(credits, p.Credits);
            var free = System.Threading.Channels.Channel.CreateUnbounded<FrameBuffer>();
            for (int i = 0; i < buffers; i++)
                free.Writer.TryWrite(p.Rent(Len));
            int finals = 0, storedN = 0;
            Task reader = Task.Run(async () =>
            {
                await foreach (Ack a in p.ReadAcksAsync())
                {
                    if (a.ReturnsBuffer)
                        free.Writer.TryWrite(a.Buffer);
                    if (a.IsFinal)
                    {
                        storedN += a.Stored ? 1 : 0;
                        if (++finals == N)
                            return;
                    }
                }
            });
            int maxCredit = 0, maxWork = 0;
            for (int i = 0; i < N; i++)
            {
                string id = $"cr{i}";
                FrameBuffer b = await free.Reader.ReadAsync();
                var (len, crc) = Fill(b, id, Len);
                frames.Add((id, wafer, len, crc));
                await p.SubmitAsync(b, len, id, wafer, crc32c: crc);
                (int c, int w) = p.Permits;
                (maxCredit, maxWork) = (Math.Max(maxCredit, c), Math.Max(maxWork, w));
            }
            await reader.WaitAsync(TimeSpan.FromMinutes(2));
            Assert.Equal(N, storedN);
            (int credit, int work) = p.Permits;
            Assert.True(Math.Max(maxCredit, credit) <= 1 && Math.Max(maxWork, work) <= 1,
                        $"{N} frames: up to {Math.Max(maxCredit, credit)} credit permits and {Math.Max(maxWork, work)} pump permits held (at most 1 each)");
            while (free.Reader.TryRead(out FrameBuffer? b))
                b.Release();
        }
        Verify(node, wafer, frames);
    }

    [Fact]
    public async Task Library_log_lines_go_to_the_ILogger()
    {
        await using IngestNode node = await Support.Node("logger");
        var log = new ListLogger();
        // Auto on a node without RDMA: libingest says at INFO which transport the session
        // took and why (no WARN: auto allowed the gRPC stream)
        await using (Producer p = Producer.Connect(Support.Grpc(node) with { Transport = Transport.Auto, Logger = log }))
        {
        }
        lock (log.Lines)
        {
            Assert.Contains(log.Lines, l => l.Level == LogLevel.Information && l.Text.Contains("libingest producer:", StringComparison.Ordinal)
                                            && l.Text.Contains("transport grpc", StringComparison.Ordinal));
            Assert.DoesNotContain(log.Lines, l => l.Level == LogLevel.Warning && l.Text.Contains("fallback", StringComparison.Ordinal));
        }
    }

    [Fact]
    public async Task Addresses_as_Grpc_Net_Client_takes_them_and_errors_as_codes()
    {
        await using IngestNode node = await Support.Node("scheme");
        // http://host:port, as GrpcChannel.ForAddress takes it
        await using (Producer p = Producer.Connect(Support.Grpc(node) with { Server = "http://" + node.Address + "/" }))
        {
            FrameBuffer b = p.Rent(1000);
            b.Memory.Span.Fill(1);
            p.Submit(b, 1000, "scheme-1", "cs-scheme");
            Assert.Contains(Support.DrainAcks(p), a => a.Stored);
        }
        var e1 = Assert.Throws<ArgumentException>(() => Producer.Connect(Support.Grpc(node) with { Server = "127.0.0.1" }));
        Assert.Contains("no port", e1.Message, StringComparison.Ordinal);
        Assert.Throws<ArgumentException>(() => Producer.Connect(Support.Grpc(node) with { Server = "https://" + node.Address }));
        Assert.Throws<ArgumentException>(() => Producer.Connect(Support.Grpc(node) with { Server = "::1:50051" }));
        Assert.Throws<ArgumentException>(() => Producer.Connect(Support.Grpc(node) with { Server = "127.0.0.1:99999" }));

        // nothing listens: ConnectionRefused, retryable, from libingest's code
        var l = new TcpListener(IPAddress.Loopback, 0);
        l.Start();
        int closedPort = ((IPEndPoint)l.LocalEndpoint).Port;
        l.Stop();
        var e2 = Assert.Throws<IngestException>(() => Producer.Connect(Support.Grpc(node) with { Server = $"127.0.0.1:{closedPort}" }));
        Assert.Equal(IngestErrorCode.ConnectionRefused, e2.ErrorCode);
        Assert.Equal(-111, e2.Errno);
        Assert.True(e2.Retryable);

        // a listener that never speaks HTTP/2: the connect waits; cancelling ends the wait at once
        var silent = new TcpListener(IPAddress.Loopback, 0);
        silent.Start();
        try
        {
            using var cts = new CancellationTokenSource(200);
            Task<Producer> t = Producer.ConnectAsync(Support.Grpc(node) with
            {
                Server = $"127.0.0.1:{((IPEndPoint)silent.LocalEndpoint).Port}",
                ConnectTimeout = TimeSpan.FromSeconds(30),
            }, cts.Token);
            Task first = await Task.WhenAny(t, Task.Delay(TimeSpan.FromSeconds(25)));
            Assert.True(first == t, "the cancelled connect ended before its 30 s connect timeout");
            await Assert.ThrowsAnyAsync<OperationCanceledException>(() => t);
        }
        finally
        {
            silent.Stop();
        }
    }
}
