// SPDX-License-Identifier: Apache-2.0
//
// The seed's C# producer, as existing producers are written: a Grpc.Net.Client channel,
// RDMASvc.ControlStream from rdma_stream.proto alone, one FrameMeta per frame with a GUID
// frameId, no waferId and a timestamp in ms (ToUnixTimeMilliseconds), an Ack back for
// each, matched by frameId. No Negotiate, no session: what the node must serve unchanged.
//
//   SeedClient --server http://HOST:PORT [--frames N]
// prints one JSON line {"sent":N,"acks":A,"distinct":D,"unknown":U,"ok":K,"nack":F,
// "firstMsg":"...","status":"OK"}; exit 0 when the call ended with status OK.
using System.Text.Json;
using Grpc.Core;
using Grpc.Net.Client;
using H3000;

namespace SeedClient;

/// <summary>What the seed's example does: one stream, frames in, one Ack per frame out.</summary>
public static class SeedProducer
{
    /// <summary>A FrameMeta as the seed's C# client fills it (addr/rkey/length of its buffer).</summary>
    public static FrameMeta Meta(string frameId, ulong addr = 0x7f0000000000, uint rkey = 0x1234, ulong length = 1 << 20) =>
        new()
        {
            FrameId = frameId,
            Addr = addr,
            Rkey = rkey,
            Length = length,
            Timestamp = DateTimeOffset.UtcNow.ToUnixTimeMilliseconds(),
        };

    public sealed record Result(int Sent, List<Ack> Acks, StatusCode Status, string Detail);

    /// <summary>Sends the frames on one ControlStream, half-closes, reads every Ack to the end.</summary>
    public static async Task<Result> SendAsync(RDMASvc.RDMASvcClient client, IReadOnlyList<string> frameIds,
                                               CancellationToken ct = default)
    {
        using var call = client.ControlStream(deadline: DateTime.UtcNow.AddMinutes(2), cancellationToken: ct);
        var acks = new List<Ack>();
        var reader = Task.Run(async () =>
        {
            await foreach (Ack ack in call.ResponseStream.ReadAllAsync(ct))
                acks.Add(ack);   // OnAck(ack.FrameId, ack.Ok, ack.Msg): recycle that frame's buffer
        }, ct);
        ulong i = 0;
        foreach (string id in frameIds)
            await call.RequestStream.WriteAsync(Meta(id, 0x7f0000000000 + (i++ << 20)), ct);
        await call.RequestStream.CompleteAsync();
        try
        {
            await reader;
            return new Result(frameIds.Count, acks, call.GetStatus().StatusCode, call.GetStatus().Detail);
        }
        catch (RpcException e)
        {
            return new Result(frameIds.Count, acks, e.StatusCode, e.Status.Detail);
        }
    }
}

public static class Program
{
    public static async Task<int> Main(string[] args)
    {
        string? server = null;
        int frames = 500;
        for (int i = 0; i + 1 < args.Length; i += 2)
        {
            if (args[i] == "--server") server = args[i + 1];
            else if (args[i] == "--frames") frames = int.Parse(args[i + 1], System.Globalization.CultureInfo.InvariantCulture);
        }
        if (server is null)
        {
            Console.Error.WriteLine("usage: SeedClient --server http://HOST:PORT [--frames N]");
            return 2;
        }
        // ingestd speaks cleartext HTTP/2 (h2c) unless started with --tls-cert (then https://)
        using var channel = GrpcChannel.ForAddress(server);
        var client = new RDMASvc.RDMASvcClient(channel);
        var ids = Enumerable.Range(0, frames).Select(_ => Guid.NewGuid().ToString()).ToList();
        SeedProducer.Result r = await SeedProducer.SendAsync(client, ids);
        var sent = new HashSet<string>(ids);
        var seen = new HashSet<string>();
        int unknown = 0;
        foreach (Ack a in r.Acks)
        {
            if (!sent.Contains(a.FrameId)) unknown++;
            seen.Add(a.FrameId);
        }
        Console.WriteLine(JsonSerializer.Serialize(new
        {
            sent = r.Sent,
            acks = r.Acks.Count,
            distinct = seen.Count,
            unknown,
            ok = r.Acks.Count(a => a.Ok),
            nack = r.Acks.Count(a => !a.Ok && a.Msg.Length > 0),
            firstMsg = r.Acks.Count > 0 ? r.Acks[0].Msg : "",
            status = r.Status.ToString(),
            detail = r.Detail,
        }));
        return r.Status == StatusCode.OK ? 0 : 1;
    }
}
