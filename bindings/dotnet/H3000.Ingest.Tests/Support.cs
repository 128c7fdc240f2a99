// SPDX-License-Identifier: Apache-2.0
using System.Diagnostics;
using Grpc.Net.Client;
using H3000.TestCommon;

namespace H3000.Ingest.Tests;

/// <summary>Paths and small helpers shared by the binding's tests.</summary>
internal static class Support
{
    public static string Work(string name)
    {
        string d = Path.Combine(IngestNode.BuildDir, "test-work", "dotnet-binding", name);
        if (Directory.Exists(d))
            Directory.Delete(d, true);
        Directory.CreateDirectory(d);
        return d;
    }

    /// <summary>A fallback node: no RDMA, one persistence worker.</summary>
    public static Task<IngestNode> Node(string name, params string[] extra) =>
        IngestNode.StartAsync(Work(name), ["--pool", "256K:16,1M:16", "--workers", "1", "--rdma", "off", "--frame-timeout", "20", .. extra]);

    public static ProducerOptions Grpc(IngestNode n) => new()
    {
        Server = n.Address,
        Transport = Transport.Grpc,
        PoolFrames = 16,
        PoolFrameSize = 256 << 10,
        ClientName = "H3000.Ingest.Tests",
    };

    /// <summary>Runs a program of the build tree; (exit status, stdout + stderr).</summary>
    public static (int Rc, string Output) Run(string path, params string[] args)
    {
        var psi = new ProcessStartInfo(path) { RedirectStandardOutput = true, RedirectStandardError = true };
        foreach (string a in args)
            psi.ArgumentList.Add(a);
        using Process p = Process.Start(psi)!;
        Task<string> err = p.StandardError.ReadToEndAsync();
        string o = p.StandardOutput.ReadToEnd();
        if (!p.WaitForExit(120000))
        {
            p.Kill();
            return (-1, o + err.Result + "\n(timed out)");
        }
        return (p.ExitCode, o + err.Result);
    }

    /// <summary>Polls until every frame in flight has its final ack (bounded); the acks.</summary>
    public static List<Ack> DrainAcks(Producer p, int timeoutMs = 60000)
    {
        var acks = new List<Ack>();
        var buf = new Ack[64];
        long end = Environment.TickCount64 + timeoutMs;
        while (p.InFlight > 0 && Environment.TickCount64 < end)
        {
            int n = p.Poll(buf, TimeSpan.FromMilliseconds(50));
            acks.AddRange(buf.AsSpan(0, n).ToArray());
        }
        return acks;
    }

    /// <summary>The node gave every pool slot back and holds nothing in flight (Stats, bounded wait).</summary>
    public static async Task<bool> NodeIdle(IngestNode n)
    {
        using var ch = GrpcChannel.ForAddress("http://" + n.Address);
        var c = new Protocol.RDMASvc.RDMASvcClient(ch);
        long end = Environment.TickCount64 + 20000;
        while (Environment.TickCount64 < end)
        {
            try
            {
                var s = await c.StatsAsync(new Protocol.StatsRequest(), deadline: DateTime.UtcNow.AddSeconds(5));
                if (s.PoolSlotsFree == s.PoolSlotsTotal && s.FramesInFlight == 0)
                    return true;
            }
            catch (Grpc.Core.RpcException)
            {
            }
            await Task.Delay(100);
        }
        return false;
    }

    /// <summary>Frame files the node holds under a wafer.</summary>
    public static string[] Files(IngestNode n, string wafer)
    {
        string d = Path.Combine(n.DataDir, "frames", wafer);
        return Directory.Exists(d) ? Directory.GetFiles(d) : [];
    }
}
