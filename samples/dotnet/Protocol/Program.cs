// SPDX-License-Identifier: Apache-2.0
//
// A producer that speaks the node's protocol with Grpc.Net.Client alone (no libingest, no
// RDMA): Negotiate, then each frame as chunks of the negotiated maxChunkSize on one
// PushFrames stream, at most `credits` frames unacknowledged; the frame counts once its
// Ack says `stored`. The client is generated from h3000.proto as the H3000.Ingest NuGet
// package ships it (Protocol.csproj). Exit 0 only when the node stored every frame.
//
//   Protocol --server http://HOST:PORT [--count N] [--size BYTES] [--wafer ID]
using System.Globalization;
using System.Security.Cryptography;
using Google.Protobuf;
using Grpc.Core;
using Grpc.Net.Client;
using H3000.Ingest.Protocol;

string server = "http://127.0.0.1:50051", wafer = "sample-grpc";
int count = 20, size = 1 << 20;
for (int i = 0; i + 1 < args.Length; i += 2)
{
    switch (args[i])
    {
        case "--server": server = args[i + 1]; break;
        case "--count": count = int.Parse(args[i + 1], CultureInfo.InvariantCulture); break;
        case "--size": size = int.Parse(args[i + 1], CultureInfo.InvariantCulture); break;
        case "--wafer": wafer = args[i + 1]; break;
        default:
            Console.Error.WriteLine($"unknown option {args[i]}");
            return 2;
    }
}

using GrpcChannel channel = GrpcChannel.ForAddress(server);   // "http://host:port" (h2c), or https://
var client = new RDMASvc.RDMASvcClient(channel);
NegotiateReply n = await client.NegotiateAsync(new NegotiateRequest
{
    VersionMin = 1, VersionMax = 1, ClientName = "H3000.Ingest protocol sample",
    Transports = { Transport.GrpcStream },
}, deadline: DateTime.UtcNow.AddSeconds(10));
Console.WriteLine($"negotiated: session {n.SessionId}, credits {n.Credits}, chunks of {n.MaxChunkSize} bytes, node {n.ServerVersion}");

var md = new Metadata { { "h3000-session-id", n.SessionId.ToString(CultureInfo.InvariantCulture) } };
using AsyncDuplexStreamingCall<FrameChunk, Ack> call = client.PushFrames(md, deadline: DateTime.UtcNow.AddMinutes(5));
using var credits = new SemaphoreSlim((int)Math.Max(1, n.Credits));
int stored = 0, failed = 0;
Task reader = Task.Run(async () =>
{
    await foreach (Ack a in call.ResponseStream.ReadAllAsync())
    {
        if (a.Stage == AckStage.Received)
            continue;                       // not final: the frame is in the node, not yet on disk
        if (a.Stored)
            stored++;
        else
            Console.Error.WriteLine($"{a.FrameId}: {a.Code}: {a.Msg}{(a.Retryable ? " (retryable)" : "")}");
        failed += a.Stored ? 0 : 1;
        credits.Release();
    }
});

byte[] data = new byte[size];
int chunk = (int)n.MaxChunkSize;
for (int f = 0; f < count; f++)
{
    await credits.WaitAsync();
    RandomNumberGenerator.Fill(data);   // a frame's bytes are the node's once its last chunk is written
    string id = "frame-" + f.ToString(CultureInfo.InvariantCulture);
    for (int off = 0; off < size; off += chunk)
    {
        int len = Math.Min(chunk, size - off);
        var c = new FrameChunk
        {
            FrameId = id, Offset = (ulong)off, Last = off + len >= size,
            Data = ByteString.CopyFrom(data, off, len),
        };
        if (off == 0)
            c.Meta = new FrameMeta { FrameId = id, WaferId = wafer, Length = (ulong)size, Timestamp = DateTimeOffset.UtcNow.ToUnixTimeMilliseconds() };
        await call.RequestStream.WriteAsync(c);
    }
}
await call.RequestStream.CompleteAsync();
await reader;
Console.WriteLine($"{stored} of {count} frames stored ({failed} failed)");
return stored == count ? 0 : 1;
