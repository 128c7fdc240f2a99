// SPDX-License-Identifier: Apache-2.0
//
// A C# producer over H3000.Ingest: frames in registered buffers, RDMA when the node and
// this host can, else the gRPC fallback; every frame's bytes stay untouched until its
// ack, and the program exits 0 only when the node says every frame is stored.
//
//   Producer --server HOST:PORT [--count N] [--size BYTES] [--wafer ID] [--transport auto|rdma|rdma-write|grpc] [--async]
//
// Two ways to drive it: a Poll loop on this thread (the default), or --async: RentAsync and
// SubmitAsync on this task while another task reads ReadAcksAsync and gives each buffer
// back to the pool when its ack returns it (the async recycling of docs/CSHARP.md).
using System.Security.Cryptography;
using H3000.Ingest;

string server = "127.0.0.1:50051", wafer = "sample", transport = "auto";
int count = 100, size = 1 << 20;
bool useAsync = args.Contains("--async");
args = args.Where(a => a != "--async").ToArray();
for (int i = 0; i + 1 < args.Length; i += 2)
{
    switch (args[i])
    {
        case "--server": server = args[i + 1]; break;
        case "--count": count = int.Parse(args[i + 1]); break;
        case "--size": size = int.Parse(args[i + 1]); break;
        case "--wafer": wafer = args[i + 1]; break;
        case "--transport": transport = args[i + 1]; break;
        default:
            Console.Error.WriteLine($"unknown option {args[i]}");
            return 2;
    }
}

// where the native library came from (the package's runtimes/linux-x64/native, or the system)
string version = Producer.LibraryVersion;   // loads it
string native = File.ReadLines("/proc/self/maps").Select(l => l.Split(' ', StringSplitOptions.RemoveEmptyEntries))
                    .Where(w => w.Length >= 6 && w[5].EndsWith("/libingest.so.1")).Select(w => w[5]).FirstOrDefault() ?? "?";
Console.WriteLine($"libingest {version} ({native})");

var options = new ProducerOptions
{
    Server = server,
    Transport = transport switch
    {
        "rdma" => Transport.Rdma,
        "rdma-write" => Transport.RdmaWrite,
        "grpc" => Transport.Grpc,
        _ => Transport.Auto,
    },
    PoolFrames = 8,
    PoolFrameSize = size,
    ClientName = "H3000.Ingest sample",
};
await using Producer producer = await Producer.ConnectAsync(options);
Console.WriteLine($"connected: {producer.ActualTransport} ({producer.TransportNote}), session {producer.SessionId}");
if (useAsync)
    return await RunAsync(producer);

var free = new Queue<FrameBuffer>();
for (int i = 0; i < options.PoolFrames; i++)
    free.Enqueue(producer.Rent(size));
var crcs = new Dictionary<string, uint>();
var acks = new Ack[16];
int sent = 0, stored = 0, failed = 0;
while (stored + failed < count)
{
    // fill and submit while there is a free buffer and a credit
    while (sent < count && free.Count > 0)
    {
        FrameBuffer buffer = free.Peek();
        RandomNumberGenerator.Fill(buffer.Memory.Span);
        uint crc = Producer.Crc32c(buffer.Memory.Span);   // before submit (in flight, the bytes are the node's); declared, the library need not read them again
        string id = $"frame-{sent}";
        if (!producer.TrySubmit(buffer, size, id, wafer, DateTimeOffset.UtcNow.ToUnixTimeMilliseconds(), crc))
            break;   // no credit: the acks below free one
        crcs[id] = crc;
        free.Dequeue();
        sent++;
    }
    int n = producer.Poll(acks, TimeSpan.FromMilliseconds(100));
    for (int i = 0; i < n; i++)
    {
        Ack a = acks[i];
        if (a.Stored)
        {
            if (a.Crc32c == crcs[a.FrameId])
                stored++;
            else
            {
                failed++;
                Console.WriteLine($"{a.FrameId}: the node holds crc32c {a.Crc32c:x8}, sent {crcs[a.FrameId]:x8}");
            }
        }
        else if (a.IsFinal)
        {
            failed++;
            Console.WriteLine($"{a.FrameId}: not stored: {a.Code}{(a.Retryable ? " (retryable)" : "")}: {a.Message}");
        }
        // the buffer is ours again once its recycle ack (RECEIVED) or final ack came
        if (a.ReturnsBuffer)
            free.Enqueue(a.Buffer);
    }
}
Console.WriteLine($"{stored} of {count} frames stored ({failed} failed)");
return stored == count ? 0 : 1;

// The async program: rent (waiting for a buffer given back), fill, submit; the ack reader
// releases each buffer its ack returns, which wakes the next RentAsync.
async Task<int> RunAsync(Producer p)
{
    var sentCrc = new System.Collections.Concurrent.ConcurrentDictionary<string, uint>();
    int ok = 0, bad = 0;
    Task reader = Task.Run(async () =>
    {
        await foreach (Ack a in p.ReadAcksAsync())
        {
            if (a.ReturnsBuffer)
                a.Buffer.Release();   // back to the pool
            if (a.Stored && a.Crc32c == sentCrc[a.FrameId])
                ok++;
            else if (a.IsFinal)
            {
                bad++;
                Console.WriteLine($"{a.FrameId}: not stored: {a.Code}{(a.Retryable ? " (retryable)" : "")}: {a.Message}");
            }
            if (a.IsFinal && ok + bad == count)
                return;
        }
    });
    for (int i = 0; i < count; i++)
    {
        FrameBuffer buffer = await p.RentAsync(size);
        RandomNumberGenerator.Fill(buffer.Memory.Span);
        uint crc = Producer.Crc32c(buffer.Memory.Span);
        string id = $"frame-{i}";
        sentCrc[id] = crc;
        await p.SubmitAsync(buffer, size, id, wafer, DateTimeOffset.UtcNow.ToUnixTimeMilliseconds(), crc);
    }
    await reader;
    Console.WriteLine($"{ok} of {count} frames stored ({bad} failed)");
    return ok == count ? 0 : 1;
}
