// SPDX-License-Identifier: Apache-2.0
//
// An ingestd of the build tree on 127.0.0.1 with a kernel-picked port, for the C# tests
// (interop.seed_dotnet, dotnet.binding, bench/dotnet.sh). Every wait is bounded.
using System.Diagnostics;
using System.Runtime.InteropServices;

namespace H3000.TestCommon;

public sealed partial class IngestNode : IAsyncDisposable
{
    private readonly Process _proc;

    private IngestNode(Process proc, string dataDir, string logPath, string address)
    {
        _proc = proc;
        DataDir = dataDir;
        LogPath = logPath;
        Address = address;
    }

    /// <summary>The build tree (ING_BUILD_DIR, set by ctest and the scripts).</summary>
    public static string BuildDir =>
        Environment.GetEnvironmentVariable("ING_BUILD_DIR") is { Length: > 0 } b ? b
            : throw new InvalidOperationException("ING_BUILD_DIR is not set: run through ctest or tests/dotnet/run.sh");

    public static string App(string name) => Path.Combine(BuildDir, "apps", name);

    public string DataDir { get; }
    public string LogPath { get; }
    /// <summary>"127.0.0.1:PORT".</summary>
    public string Address { get; }
    public int Pid => _proc.Id;
    public bool Exited => _proc.HasExited;

    public static Task<IngestNode> StartAsync(string dir, params string[] args) => StartOnAsync(dir, "127.0.0.1:0", args);

    /// <summary>As <see cref="StartAsync"/> on a given listen address (a restart on the port it had).</summary>
    public static async Task<IngestNode> StartOnAsync(string dir, string listen, params string[] args)
    {
        Directory.CreateDirectory(dir);
        string data = Path.Combine(dir, "data"), portFile = Path.Combine(dir, "port"), log = Path.Combine(dir, "ingestd.log");
        File.Delete(portFile);
        var psi = new ProcessStartInfo(App("ingestd"))
        {
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            UseShellExecute = false,
        };
        foreach (string a in new[] { "--listen", listen, "--port-file", portFile, "--data-dir", data }.Concat(args))
            psi.ArgumentList.Add(a);
        var p = new Process { StartInfo = psi };
        var logw = new StreamWriter(log) { AutoFlush = true };
        object gate = new();
        p.OutputDataReceived += (_, e) => { if (e.Data != null) lock (gate) logw.WriteLine(e.Data); };
        p.ErrorDataReceived += (_, e) => { if (e.Data != null) lock (gate) logw.WriteLine(e.Data); };
        p.Start();
        p.BeginOutputReadLine();
        p.BeginErrorReadLine();
        long end = Environment.TickCount64 + 30000;
        while (Environment.TickCount64 < end)
        {
            if (p.HasExited)
                break;
            if (File.Exists(portFile) && File.ReadAllText(portFile).Trim() is { Length: > 0 } port)
                return new IngestNode(p, data, log, "127.0.0.1:" + port);
            await Task.Delay(50);
        }
        if (!p.HasExited)
            p.Kill();
        await Task.Delay(200);
        throw new InvalidOperationException($"ingestd did not start ({string.Join(' ', args)}):\n{Tail(log)}");
    }

    [LibraryImport("libc", EntryPoint = "kill", SetLastError = true)]
    private static partial int SysKill(int pid, int sig);

    public void Signal(int sig) => SysKill(_proc.Id, sig);

    /// <summary>SIGTERM, wait (bounded) for the exit status; SIGKILL after the deadline (-9).</summary>
    public async Task<int> StopAsync(int timeoutMs = 20000)
    {
        if (!_proc.HasExited)
            Signal(15);
        using var cts = new CancellationTokenSource(timeoutMs);
        try
        {
            await _proc.WaitForExitAsync(cts.Token);
            return _proc.ExitCode;
        }
        catch (OperationCanceledException)
        {
            _proc.Kill();
            await _proc.WaitForExitAsync();
            return -9;
        }
    }

    public async Task KillAsync()
    {
        if (!_proc.HasExited)
            Signal(9);
        await _proc.WaitForExitAsync();
    }

    public string LogTail(int bytes = 4000) => Tail(LogPath, bytes);

    private static string Tail(string path, int bytes = 4000)
    {
        try
        {
            using var fs = new FileStream(path, FileMode.Open, FileAccess.Read, FileShare.ReadWrite);
            if (fs.Length > bytes)
                fs.Seek(-bytes, SeekOrigin.End);
            return new StreamReader(fs).ReadToEnd();
        }
        catch (IOException e)
        {
            return "(no log: " + e.Message + ")";
        }
    }

    /// <summary>Where the node files a frame of a plain id ([A-Za-z0-9._-]).</summary>
    public string FramePath(string wafer, string frameId) => Path.Combine(DataDir, "frames", wafer, frameId + ".frame");

    public async ValueTask DisposeAsync()
    {
        if (!_proc.HasExited)
            await StopAsync();
        _proc.Dispose();
    }
}
