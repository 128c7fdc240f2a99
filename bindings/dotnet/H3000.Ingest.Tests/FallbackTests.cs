// SPDX-License-Identifier: Apache-2.0
using H3000.TestCommon;

namespace H3000.Ingest.Tests;

/// <summary>Frames from C# over the gRPC fallback, checked on disk by ingest-verify.</summary>
public class FallbackTests
{
    private const ulong Seed = 42;

    /// <summary>Fills a rented buffer with frame id's synthetic bytes (what ingest-verify regenerates).</summary>
    private static (int Len, uint Crc) Fill(FrameBuffer b, string id, Random r)
    {
        int len = r.Next(1024, b.Length + 1);
        Span<byte> s = b.Memory.Span[..len];
        Synth.Fill(s, Synth.Key(id), Seed);
        return (len, Producer.Crc32c(s));
    }

    [Fact]
    public async Task A_thousand_frames_over_the_fallback_are_stored_byte_exact()
    {
        await using IngestNode node = await Support.Node("fallback1000");
        var frames = new List<(string, string, long, uint)>();
        var acks = new Dictionary<string, List<Ack>>();
        var r = new Random(7);
        await using (Producer p = Producer.Connect(Support.Grpc(node)))
        {
            Assert.Equal(Transport.Grpc, p.ActualTransport);
            var free = new Queue<FrameBuffer>(Enumerable.Range(0, 16).Select(_ => p.Rent(256 << 10)));
            var buf = new Ack[32];
            int next = 0;
            long end = Environment.TickCount64 + 180000;
            while ((next < 1000 || p.InFlight > 0) && Environment.TickCount64 < end)
            {
                while (next < 1000 && free.Count > 0)
                {
                    FrameBuffer b = free.Peek();
                    string id = $"cs-{next:D4}";
                    string wafer = "cs-w" + (next % 3);
                    var (len, crc) = Fill(b, id, r);
                    // every other frame declares its CRC-32C (the library does not compute it)
                    if (!p.TrySubmit(b, len, id, wafer, crc32c: next % 2 == 0 ? crc : null))
                        break;
                    free.Dequeue();
                    frames.Add((id, wafer, len, crc));
                    next++;
                }
                int n = p.Poll(buf, TimeSpan.FromMilliseconds(20));
                for (int i = 0; i < n; i++)
                {
                    Ack a = buf[i];
                    if (!acks.TryGetValue(a.FrameId, out var l))
                        acks[a.FrameId] = l = [];
                    l.Add(a);
                    // recycle on RECEIVED (the default): the buffer is ours again
                    if (a.ReturnsBuffer)
                        free.Enqueue(a.Buffer!);
                }
            }
            ProducerStats st = p.GetStats();
            Assert.Equal(1000UL, st.Durable);
            Assert.Equal(0UL, st.Failed);
        }
        Assert.Equal(1000, frames.Count);
        Assert.Equal(1000, acks.Count);
        foreach (var (id, wafer, _, crc) in frames)
        {
            List<Ack> l = acks[id];
            Assert.True(l.Count(a => a.IsFinal) == 1, $"{id}: {string.Join("; ", l)}");
            Assert.True(l.Count(a => a.ReturnsBuffer) == 1, $"{id}: the buffer came back {l.Count(a => a.ReturnsBuffer)} times");
            Ack last = l[^1];
            Assert.True(last.Stored && last.Ok && last.Stage == AckStage.Durable && last.WaferId == wafer && last.Crc32c == crc, last.ToString());
        }
        string man = Path.Combine(node.DataDir, "..", "manifest");
        Synth.WriteManifest(man, frames, Seed);
        var (rc, output) = Support.Run(IngestNode.App("ingest-verify"), "--data-dir", node.DataDir, "--manifest", man);
        Assert.True(rc == 0, "ingest-verify: " + output);
        Assert.Contains("1000", output, StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_declared_CRC_that_does_not_match_fails_the_frame_and_stores_nothing()
    {
        await using IngestNode node = await Support.Node("badcrc");
        await using Producer p = Producer.Connect(Support.Grpc(node) with { PoolFrames = 2 });
        var r = new Random(11);
        FrameBuffer b = p.Rent(128 << 10);
        var acks = new List<Ack>();
        var buf = new Ack[8];
        void Send(string id, Func<uint, uint?> declare)
        {
            var (len, crc) = Fill(b, id, r);
            Assert.True(p.TrySubmit(b, len, id, "cs-crc", crc32c: declare(crc)));
            long end = Environment.TickCount64 + 60000;
            while (p.InFlight > 0 && Environment.TickCount64 < end)
            {
                int n = p.Poll(buf, TimeSpan.FromMilliseconds(50));
                for (int i = 0; i < n; i++)
                    acks.Add(buf[i]);
            }
            Assert.Equal(0, p.InFlight);
        }
        Send("bad", crc => crc ^ 1);      // one bit off
        Send("good", crc => crc);
        Ack bad = acks.Last(a => a.FrameId == "bad" && a.IsFinal);
        Assert.True(!bad.Ok && !bad.Stored && bad.Code == ErrorCode.CrcMismatch, bad.ToString());
        Ack good = acks.Last(a => a.FrameId == "good" && a.IsFinal);
        Assert.True(good.Ok && good.Stored, good.ToString());
        string dir = Path.Combine(node.DataDir, "frames", "cs-crc");
        Assert.False(File.Exists(Path.Combine(dir, "bad.frame")), "the frame with the wrong CRC was stored");
        Assert.True(File.Exists(Path.Combine(dir, "good.frame")));
    }

    [Fact]
    public async Task SubmitAsync_and_ReadAcksAsync_deliver_every_ack()
    {
        await using IngestNode node = await Support.Node("async");
        await using Producer p = await Producer.ConnectAsync(Support.Grpc(node) with { PoolFrames = 8 });
        var r = new Random(3);
        var stored = new HashSet<string>();
        using var cts = new CancellationTokenSource(TimeSpan.FromMinutes(2));
        var reader = Task.Run(async () =>
        {
            await foreach (Ack a in p.ReadAcksAsync(cts.Token))
            {
                if (a.Stored)
                    lock (stored) stored.Add(a.FrameId);
                if (stored.Count == 100)
                    break;
            }
        });
        var bufs = Enumerable.Range(0, 8).Select(_ => p.Rent(64 << 10)).ToArray();
        for (int i = 0; i < 100; i++)
        {
            FrameBuffer b = bufs[i % 8];
            while (b.InFlight)   // recycled by its RECEIVED ack, which the pump delivers
                await Task.Delay(1, cts.Token);
            var (len, _) = Fill(b, $"as-{i}", r);
            await p.SubmitAsync(b, len, $"as-{i}", "cs-async", cancellationToken: cts.Token);
        }
        await reader;
        Assert.Equal(100, stored.Count);
        Assert.Throws<InvalidOperationException>(() => p.Poll(new Ack[4], TimeSpan.Zero));
    }
}
