// SPDX-License-Identifier: Apache-2.0
using H3000.TestCommon;

namespace H3000.Ingest.Tests;

/// <summary>Bad input becomes an exception that says what is wrong, and nothing is stored.</summary>
public class BadInputTests
{
    [Fact]
    public async Task Bad_ids_lengths_and_buffers_throw_and_store_nothing()
    {
        // a node of 1 MiB slots, producer pool frames of 8 MiB: a frame above the node's
        // maximum (what Negotiate said) fits a buffer
        await using IngestNode node = await IngestNode.StartAsync(Support.Work("badinput"), "--pool", "1M:8", "--workers", "1",
                                                                  "--rdma", "off");
        await using Producer p = Producer.Connect(Support.Grpc(node) with { PoolFrames = 4, PoolFrameSize = 8 << 20 });
        int tooBig = checked((int)p.MaxFrameSize + 1);
        Assert.True(tooBig <= 8 << 20, $"the node's maximum frame {p.MaxFrameSize} fits no 8 MiB buffer");
        await using Producer other = Producer.Connect(Support.Grpc(node) with { PoolFrames = 1 });
        FrameBuffer b = p.Rent(8 << 20);
        b.Memory.Span.Fill(0x5a);

        ArgumentException e = Assert.Throws<ArgumentException>(() => p.TrySubmit(b, 100, "", "bad"));
        Assert.Contains("empty", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentException>(() => p.TrySubmit(b, 100, new string('y', 257), "bad"));
        Assert.Contains("257 bytes", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentException>(() => p.TrySubmit(b, 100, new string('\u00e9', 129), "bad"));
        Assert.Contains("258 bytes", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentException>(() => p.TrySubmit(b, 100, "ab\u0001cd", "bad"));
        Assert.Contains("control character U+0001", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentException>(() => p.TrySubmit(b, 100, "ok-id", "wafer\nx"));
        Assert.Contains("waferId", e.Message, StringComparison.Ordinal);
        e = Assert.Throws<ArgumentException>(() => p.TrySubmit(b, 100, "bad-\ud800-id", "bad"));
        Assert.Contains("lone surrogate", e.Message, StringComparison.Ordinal);
        Assert.Throws<ArgumentOutOfRangeException>(() => p.TrySubmit(b, 0, "len0", "bad"));
        Assert.Throws<ArgumentOutOfRangeException>(() => p.TrySubmit(b, (8 << 20) + 1, "len-over", "bad"));
        FrameBuffer ob = other.Rent(1000);
        e = Assert.Throws<ArgumentException>(() => p.TrySubmit(ob, 100, "foreign", "bad"));
        Assert.Contains("another producer", e.Message, StringComparison.Ordinal);

        // above the node's maximum: libingest's -EINVAL with its reason, not retryable
        IngestException ie = Assert.Throws<IngestException>(() => p.TrySubmit(b, tooBig, "too-big", "bad"));
        Assert.False(ie.Retryable);
        Assert.Equal(-22, ie.Errno);
        Assert.Contains("MaxFrameSize", ie.Message, StringComparison.Ordinal);

        // a buffer in flight can be neither touched nor submitted again; the same frame twice is refused
        Assert.True(p.TrySubmit(b, 1000, "in-flight", "good"));
        Assert.Throws<InvalidOperationException>(() => b.Memory.Span[0] = 1);
        Assert.Throws<InvalidOperationException>(() => p.TrySubmit(b, 1000, "again", "good"));
        FrameBuffer b2 = p.Rent(1000);
        ie = Assert.Throws<IngestException>(() => p.TrySubmit(b2, 1000, "in-flight", "good"));
        Assert.Contains("already in flight", ie.Message, StringComparison.Ordinal);
        List<Ack> acks = Support.DrainAcks(p);
        Assert.Contains(acks, a => a.FrameId == "in-flight" && a.Stored);

        // the pool: 4 frames; a fifth rent finds none (null / a retryable exception)
        var rented = new List<FrameBuffer> { p.Rent(10), p.Rent(10) };   // b, b2 and these two
        Assert.Null(p.TryRent(10));
        ie = Assert.Throws<IngestException>(() => p.Rent(10));
        Assert.True(ie.Retryable);
        rented[0].Release();
        Assert.NotNull(p.TryRent(10));
        b2.Release();
        Assert.Throws<ObjectDisposedException>(() => b2.Memory.Span[0] = 1);
        Assert.Throws<ObjectDisposedException>(() => p.TrySubmit(b2, 10, "released", "bad"));

        // nothing of the refused frames reached the node
        Assert.Empty(Support.Files(node, "bad"));
        Assert.Single(Support.Files(node, "good"));
        Assert.True(await Support.NodeIdle(node));
    }

    [Fact]
    public void Connect_errors_say_why_and_whether_to_retry()
    {
        ArgumentException ae = Assert.Throws<ArgumentException>(() => Producer.Connect(new ProducerOptions()));
        Assert.Contains("Server", ae.Message, StringComparison.Ordinal);
        Assert.Throws<ArgumentOutOfRangeException>(() => Producer.Connect(new ProducerOptions { Server = "127.0.0.1:1", Credits = -1 }));
        // the device list: names, not both ways of saying it
        ae = Assert.Throws<ArgumentException>(() => Producer.Connect(new ProducerOptions { Server = "127.0.0.1:1", Devices = ["mlx5_0", "a,b"] }));
        Assert.Contains("'a,b' is not an RDMA device name", ae.Message, StringComparison.Ordinal);
        ae = Assert.Throws<ArgumentException>(() => Producer.Connect(new ProducerOptions { Server = "127.0.0.1:1", Devices = [] }));
        Assert.Contains("Devices is empty", ae.Message, StringComparison.Ordinal);
        ae = Assert.Throws<ArgumentException>(() => Producer.Connect(new ProducerOptions
        {
            Server = "127.0.0.1:1", Devices = ["mlx5_0"], RdmaDevice = "mlx5_1",
        }));
        Assert.Contains("not both", ae.Message, StringComparison.Ordinal);
        // a port nobody listens on: refused, worth retrying later
        using var l = new System.Net.Sockets.TcpListener(System.Net.IPAddress.Loopback, 0);
        l.Start();
        int port = ((System.Net.IPEndPoint)l.LocalEndpoint).Port;
        l.Stop();
        IngestException e = Assert.Throws<IngestException>(() => Producer.Connect(new ProducerOptions
        {
            Server = "127.0.0.1:" + port, Transport = Transport.Grpc, ConnectTimeout = TimeSpan.FromSeconds(3),
        }));
        Assert.Contains("127.0.0.1:" + port, e.Message, StringComparison.Ordinal);
        Assert.True(e.Retryable, e.Message);
    }

    [Fact]
    public async Task A_wrong_auth_token_is_refused_with_the_nodes_message()
    {
        string dir = Support.Work("authbad");
        string tf = Path.Combine(dir, "token");
        File.WriteAllText(tf, "the-right-token-0123456789\n");
        File.SetUnixFileMode(tf, UnixFileMode.UserRead | UnixFileMode.UserWrite);
        await using IngestNode node = await IngestNode.StartAsync(Path.Combine(dir, "n"), "--pool", "1M:4", "--workers", "1",
                                                                  "--rdma", "off", "--auth-token-file", tf);
        IngestException e = Assert.Throws<IngestException>(() => Producer.Connect(Support.Grpc(node) with { AuthToken = "a-wrong-token-0123456789" }));
        Assert.Contains("authToken", e.Message, StringComparison.Ordinal);
        Assert.False(e.Retryable, e.Message);
        await using Producer p = Producer.Connect(Support.Grpc(node) with { AuthToken = "the-right-token-0123456789" });
        FrameBuffer b = p.Rent(5000);
        b.Memory.Span.Fill(1);
        p.Submit(b, 5000, "auth-ok", "cs-auth");
        Assert.Contains(Support.DrainAcks(p), a => a.FrameId == "auth-ok" && a.Stored);
    }
}
