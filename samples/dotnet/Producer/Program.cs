// SPDX-License-Identifier: Apache-2.0
//
// A C# producer over H3000.Ingest: frames in registered buffers, RDMA when the node and
// this host can, else the gRPC fallback; every frame's bytes stay untouched until its
// ack, and the program exits 0 only when the node says every frame is stored.
//
//   Producer --server HOST:PORT [--count N] [--size BYTES] [--wafer ID] [--transport auto|rdma|rdma-write|grpc]
using System.Security.Cryptography;
using H3000.Ingest;

string server = "127.0.0.1:50051", wafer = "sample", transport = "auto";
int count = 100, size = 1 << 20;
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
            free.Enqueue(a.Buffer!);
    }
}
Console.WriteLine($"{stored} of {count} frames stored ({failed} failed)");
return stored == count ? 0 : 1;
