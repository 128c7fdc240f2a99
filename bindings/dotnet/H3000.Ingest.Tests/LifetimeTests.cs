// SPDX-License-Identifier: Apache-2.0
using H3000.TestCommon;

namespace H3000.Ingest.Tests;

/// <summary>Dispose with frames in flight, a node that dies, a fleet that fails over, the steady path's allocations.</summary>
public class LifetimeTests
{
    private static int OpenFds() => Directory.GetFiles("/proc/self/fd").Length;

    [Fact]
    public async Task Dispose_mid_flight_leaks_nothing()
    {
        await using IngestNode node = await Support.Node("dispose");
        // warm up once (thread pool, loader), then count
        await using (Producer w = Producer.Connect(Support.Grpc(node))) { }
        int fds0 = OpenFds();
        var stale = new List<FrameBuffer>();
        for (int round = 0; round < 20; round++)
        {
            Producer p = Producer.Connect(Support.Grpc(node) with { DrainTimeout = TimeSpan.Zero });
            for (int i = 0; i < 8; i++)
            {
                FrameBuffer b = p.Rent(256 << 10);
                b.Memory.Span.Fill((byte)i);
                Assert.True(p.TrySubmit(b, b.Length, $"d{round}-{i}", "cs-dispose"));
                stale.Add(b);
            }
            Assert.Equal(8, p.InFlight);
            await p.DisposeAsync();   // nothing waited for: closed with 8 frames in flight
            Assert.Throws<ObjectDisposedException>(() => p.Rent(10));
        }
        // every buffer of a disposed producer is dead, not dangling native memory
        foreach (FrameBuffer b in stale)
        {
            Assert.False(b.IsRented);
            Assert.Throws<ObjectDisposedException>(() => b.Memory.Span[0] = 0);
        }
        Assert.True(OpenFds() <= fds0 + 2, $"file descriptors: {fds0} before 20 rounds, {OpenFds()} after");
        // the node dropped every partial frame and holds no slot
        Assert.True(await Support.NodeIdle(node), "the node has every pool slot back");

        // DisposeAsync with the default drain waits for the frames in flight: all stored
        Producer q = Producer.Connect(Support.Grpc(node));
        for (int i = 0; i < 8; i++)
        {
            FrameBuffer b = q.Rent(100000);
            b.Memory.Span.Fill(7);
            q.Submit(b, b.Length, $"drain-{i}", "cs-drain");
        }
        await q.DisposeAsync();
        Assert.Equal(8, Support.Files(node, "cs-drain").Length);
    }

    [Fact]
    public async Task A_killed_node_fails_every_frame_in_flight_retryable()
    {
        IngestNode node = await Support.Node("killed");
        // reconnect off (negative): 1.3's behaviour, the frames in flight fail at once
        await using Producer p = Producer.Connect(Support.Grpc(node) with
        {
            FrameTimeout = TimeSpan.FromSeconds(30),
            ReconnectTimeout = TimeSpan.FromSeconds(-1),
        });
        var bufs = Enumerable.Range(0, 16).Select(_ => p.Rent(256 << 10)).ToList();
        int submitted = 0;
        foreach (FrameBuffer b in bufs)
        {
            b.Memory.Span.Fill(3);
            if (p.TrySubmit(b, b.Length, $"k-{submitted}", "cs-kill"))
                submitted++;
        }
        await node.KillAsync();
        var acks = new List<Ack>();
        var buf = new Ack[32];
        IngestException? broke = null;
        long end = Environment.TickCount64 + 40000;
        while (p.InFlight > 0 && Environment.TickCount64 < end)
        {
            try
            {
                int n = p.Poll(buf, TimeSpan.FromMilliseconds(50));
                acks.AddRange(buf.AsSpan(0, n).ToArray());
            }
            catch (IngestException e)
            {
                broke = e;
                break;
            }
        }
        // every frame either was stored before the kill or failed retryable; none is left hanging
        var final = acks.Where(a => a.IsFinal).ToList();
        if (broke is null)
            Assert.Equal(submitted, final.Count);
        else
            Assert.True(broke.Retryable, broke.Message);
        Assert.All(final.Where(a => !a.Stored), a => Assert.True(a.Retryable && !a.Ok, a.ToString()));
        Assert.Contains(final, a => !a.Stored);
        IngestException se = Assert.Throws<IngestException>(() => p.Submit(p.TryRent(10) ?? bufs.First(b => !b.InFlight), 10, "after-kill", "cs-kill"));
        Assert.True(se.Retryable, se.Message);
        await node.DisposeAsync();
    }

    [Fact]
    public async Task Fleet_mode_resends_the_frames_of_a_killed_node()
    {
        IngestNode n0 = await Support.Node("fleet0", "--node-id", "cs-n0");
        IngestNode n1 = await Support.Node("fleet1", "--node-id", "cs-n1");
        try
        {
            await using Producer p = Producer.Connect(new ProducerOptions
            {
                Servers = [n0.Address, n1.Address],
                PoolFrames = 16,
                PoolFrameSize = 128 << 10,
                AckDeadline = TimeSpan.FromSeconds(5),
                FrameTimeout = TimeSpan.FromSeconds(60),
            });
            var free = new Queue<FrameBuffer>(Enumerable.Range(0, 16).Select(_ => p.Rent(128 << 10)));
            var stored = new Dictionary<string, Ack>();
            var failed = new List<Ack>();
            var buf = new Ack[32];
            int next = 0;
            bool killed = false;
            long end = Environment.TickCount64 + 120000;
            while ((next < 200 || p.InFlight > 0) && Environment.TickCount64 < end)
            {
                while (next < 200 && free.Count > 0)
                {
                    FrameBuffer b = free.Peek();
                    string id = $"f-{next}";
                    Synth.Fill(b.Memory.Span, Synth.Key(id), 5);
                    if (!p.TrySubmit(b, b.Length, id, "cs-fleet-" + (next % 10)))
                        break;
                    free.Dequeue();
                    next++;
                }
                int n = p.Poll(buf, TimeSpan.FromMilliseconds(20));
                for (int i = 0; i < n; i++)
                {
                    Ack a = buf[i];
                    if (a.Stored) stored[a.FrameId] = a;
                    else if (a.IsFinal) failed.Add(a);
                    if (a.ReturnsBuffer)
                        free.Enqueue(a.Buffer!);   // fleet mode recycles at DURABLE
                }
                if (!killed && stored.Count >= 40)
                {
                    await n1.KillAsync();
                    killed = true;
                }
            }
            Assert.True(killed);
            Assert.Empty(failed);
            Assert.Equal(200, stored.Count);
            ProducerStats st = p.GetStats();
            Assert.True(st.Failovers >= 1, $"failovers {st.Failovers}");
            // every stored frame is on one of the nodes, byte-exact
            foreach (var (id, a) in stored)
            {
                string w = a.WaferId;
                byte[] want = Synth.Bytes(id, 128 << 10, 5);
                bool onNode = new[] { n0, n1 }.Any(n => File.Exists(n.FramePath(w, id)) && File.ReadAllBytes(n.FramePath(w, id)).AsSpan().SequenceEqual(want));
                Assert.True(onNode, $"{id} ({w}) on no node byte-exact");
            }
            if (st.Rerouted > 0)
                Assert.Contains(stored.Values, a => a.Resends > 0);
        }
        finally
        {
            await n0.DisposeAsync();
            await n1.DisposeAsync();
        }
    }

    [Fact]
    public async Task The_steady_path_allocates_nothing()
    {
        await using IngestNode node = await Support.Node("alloc", "--sink", "null");
        await using Producer p = Producer.Connect(Support.Grpc(node) with { PoolFrames = 8, PoolFrameSize = 64 << 10 });
        FrameBuffer[] bufs = Enumerable.Range(0, 8).Select(_ => p.Rent(64 << 10)).ToArray();
        foreach (FrameBuffer b in bufs)
            b.Memory.Span.Fill(9);
        string[] ids = Enumerable.Range(0, 600).Select(i => $"al-{i}").ToArray();
        var acks = new Ack[16];
        int done = 0;
        long allocated = 0;
        // frames 0..99 warm up (JIT, first-call paths); 100..599 are measured
        int next = 0, k = 0;
        long before = 0;
        long end = Environment.TickCount64 + 120000;
        while (done < ids.Length && Environment.TickCount64 < end)
        {
            if (next == 100 && before == 0)
                before = GC.GetAllocatedBytesForCurrentThread();
            FrameBuffer b = bufs[k];
            if (next < ids.Length && !b.InFlight && p.TrySubmit(b, b.Length, ids[next], "cs-alloc"))
            {
                next++;
                k = (k + 1) % bufs.Length;
            }
            int n = p.Poll(acks, TimeSpan.FromMilliseconds(1));
            for (int i = 0; i < n; i++)
                if (acks[i].IsFinal)
                    done++;
        }
        allocated = GC.GetAllocatedBytesForCurrentThread() - before;
        Assert.Equal(ids.Length, done);
        Assert.True(allocated == 0, $"{allocated} bytes allocated by 500 frames on the steady path ({allocated / 500.0:F1} per frame)");
    }
}
