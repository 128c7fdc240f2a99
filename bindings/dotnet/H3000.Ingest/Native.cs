// SPDX-License-Identifier: Apache-2.0
//
// libingest.so.1's C API (include/ingest/ingest.h, producer.h), as it is: the C names
// live here and nowhere else. Mirror structs are blittable and laid out field for field
// like the C header (tests/dotnet/layout_dump.c prints the C offsets; NativeLayoutTests
// compares them). Every struct crosses with our sizeof (the library's *_sz functions), so
// a 1.x library newer or older than this mirror reads and writes only what both know.
using System.Reflection;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

[assembly: DisableRuntimeMarshalling]

namespace H3000.Ingest;

internal static unsafe partial class Native
{
    /// <summary>The runtime package ships only the SONAME, never the -dev symlink.</summary>
    internal const string LibraryName = "libingest.so.1";

    internal const int IdMax = 256;

    static Native()
    {
        NativeLibrary.SetDllImportResolver(typeof(Native).Assembly, Resolve);
    }

    /// <summary>
    /// Makes sure the resolver is installed before the first call (the static constructor
    /// runs on first use of this class: every entry point below is in it).
    /// </summary>
    internal static void EnsureLoaded() => RuntimeHelpers.RunClassConstructor(typeof(Native).TypeHandle);

    // "libingest.so.1" exactly: the application's own folders first (a NuGet package puts
    // it in runtimes/linux-x64/native/, which the host probes), then the system loader
    // (LD_LIBRARY_PATH, ld.so.cache: /usr/lib/x86_64-linux-gnu from the .deb).
    // H3000_INGEST_LIBRARY names a file to load instead (a build tree, a test).
    private static IntPtr Resolve(string name, Assembly assembly, DllImportSearchPath? path)
    {
        if (name != LibraryName)
            return IntPtr.Zero;
        string? forced = Environment.GetEnvironmentVariable("H3000_INGEST_LIBRARY");
        if (!string.IsNullOrEmpty(forced))
            return NativeLibrary.Load(forced);
        if (NativeLibrary.TryLoad(LibraryName, assembly, DllImportSearchPath.AssemblyDirectory, out IntPtr h))
            return h;
        if (NativeLibrary.TryLoad(LibraryName, out h))
            return h;
        throw new DllNotFoundException(
            $"{LibraryName} not found: install the h3000-ingest package (it ships {LibraryName}), " +
            "use the H3000.Ingest NuGet package (runtimes/linux-x64/native), or set LD_LIBRARY_PATH " +
            "or H3000_INGEST_LIBRARY to where it is");
    }

    // ---------------------------------------------------------------- mirror structs

    [StructLayout(LayoutKind.Sequential)]
    internal struct ing_producer_opts
    {
        public nuint opts_size;
        public byte* server;
        public int transport;
        public uint credits;
        public ulong max_frame_size;
        public int connect_timeout_ms;
        public int frame_timeout_ms;
        public int recycle_on;
        public byte* client_name;
        public uint pool_frames;
        public ulong pool_frame_size;
        public byte* rdma_device;
        public uint chunk_size;
        public byte* auth_token;
        public byte* tls_ca;
        public byte* tls_cert;
        public byte* tls_key;
        public byte* tls_server_name;
        public int rdma_mode;
        // 1.2
        public byte* servers;
        public int ack_deadline_ms;
        public int keepalive_ms;
        public int node_cooldown_ms;
        public int membership_refresh_ms;
        // 1.4
        public int reconnect_timeout_ms;
        // 1.6
        public ulong stripe_min;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ing_frame_desc
    {
        public byte* frame_id;
        public byte* wafer_id;
        public long timestamp;
        public void* data;
        public ulong length;
        public uint crc32c;
        public int has_crc;
        public void* user;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ing_ack
    {
        public fixed byte frame_id[IdMax + 1];
        public fixed byte wafer_id[IdMax + 1];
        public int stage;
        public int ok;
        public int code;
        public int retryable;
        public int duplicate;
        public uint crc32c;
        public ulong latency_ns;
        public ulong node_latency_ns;
        public void* user;
        public fixed byte msg[512];
        public fixed ulong node_stage_ns[6];
        // 1.2
        public fixed byte node_id[IdMax + 1];
        public uint resends;
        // 1.3
        public int stored;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ing_producer_stats
    {
        public ulong submitted, received, durable, failed, duplicates, bytes;
        public uint in_flight;
        // 1.2
        public ulong rerouted, failovers, resent_after_received, late_acks, first_failover_to_durable_ns;
        public uint nodes, nodes_up;
    }

    // ---------------------------------------------------------------- functions

    [LibraryImport(LibraryName)]
    internal static partial uint ing_version();

    [LibraryImport(LibraryName)]
    internal static partial byte* ing_version_string();

    [LibraryImport(LibraryName)]
    internal static partial byte* ing_strerror(int code);

    [LibraryImport(LibraryName)]
    internal static partial uint ing_crc32c(uint crc, void* buf, nuint len);

    [LibraryImport(LibraryName)]
    internal static partial void ing_producer_opts_init_sz(ing_producer_opts* o, nuint size);

    [LibraryImport(LibraryName)]
    internal static partial IntPtr ing_producer_connect(ing_producer_opts* o, byte* err, nuint errlen);

    // 1.4: the connect error as -errno
    [LibraryImport(LibraryName)]
    internal static partial int ing_producer_open(IntPtr* p, ing_producer_opts* o, byte* err, nuint errlen);

    // 1.4: any thread; makes a waiting ing_producer_poll return
    [LibraryImport(LibraryName)]
    internal static partial void ing_producer_wake(ProducerHandle p);

    // 1.4
    [LibraryImport(LibraryName)]
    internal static partial int ing_error_retryable(int code);

    [LibraryImport(LibraryName)]
    internal static partial void ing_log_set_handler(delegate* unmanaged<void*, int, byte*, byte*, void> fn, void* ctx);

    [LibraryImport(LibraryName)]
    internal static partial void ing_log_set_level(int level);

    [LibraryImport(LibraryName)]
    internal static partial void ing_producer_close(IntPtr p, int timeout_ms);

    [LibraryImport(LibraryName)]
    internal static partial int ing_producer_transport(ProducerHandle p);

    [LibraryImport(LibraryName)]
    internal static partial byte* ing_producer_transport_note(ProducerHandle p);

    [LibraryImport(LibraryName)]
    internal static partial ulong ing_producer_session_id(ProducerHandle p);

    [LibraryImport(LibraryName)]
    internal static partial ulong ing_producer_max_frame(ProducerHandle p);

    [LibraryImport(LibraryName)]
    internal static partial uint ing_producer_credits(ProducerHandle p);

    [LibraryImport(LibraryName)]
    internal static partial uint ing_producer_in_flight(ProducerHandle p);

    [LibraryImport(LibraryName)]
    internal static partial void ing_producer_get_stats_sz(ProducerHandle p, ing_producer_stats* s, nuint size);

    [LibraryImport(LibraryName)]
    internal static partial int ing_producer_submit_sz(ProducerHandle p, ing_frame_desc* d, nuint size);

    [LibraryImport(LibraryName)]
    internal static partial int ing_producer_poll_sz(ProducerHandle p, ing_ack* acks, uint max, nuint ackSize, int timeoutMs);

    [LibraryImport(LibraryName)]
    internal static partial void* ing_frame_alloc(ProducerHandle p, nuint len);

    [LibraryImport(LibraryName)]
    internal static partial void ing_frame_free(ProducerHandle p, void* buf);

    /// <summary>A NUL-terminated UTF-8 string of static or caller-owned storage.</summary>
    internal static string Utf8(byte* s) => s == null ? "" : Marshal.PtrToStringUTF8((IntPtr)s) ?? "";

    /// <summary>The bytes of a fixed char array up to its first NUL, as UTF-8.</summary>
    internal static string Utf8(byte* s, int cap) =>
        System.Text.Encoding.UTF8.GetString(new ReadOnlySpan<byte>(s, cap).IndexOf((byte)0) is var n && n >= 0
            ? new ReadOnlySpan<byte>(s, n) : new ReadOnlySpan<byte>(s, cap));
}

/// <summary>A struct ing_producer *; released with ing_producer_close.</summary>
internal sealed class ProducerHandle : SafeHandle
{
    public ProducerHandle() : base(IntPtr.Zero, ownsHandle: true) { }

    internal ProducerHandle(IntPtr h) : base(IntPtr.Zero, ownsHandle: true) => SetHandle(h);

    public override bool IsInvalid => handle == IntPtr.Zero;

    /// <summary>How long ReleaseHandle waits for frames in flight (DisposeAsync sets it).</summary>
    internal int CloseTimeoutMs { get; set; }

    /// <summary>Where the close's log lines go (it may run on the thread of the last buffer's release).</summary>
    internal Microsoft.Extensions.Logging.ILogger? Logger { get; set; }

    protected override bool ReleaseHandle()
    {
        using (NativeLog.Scope(Logger))
            Native.ing_producer_close(handle, CloseTimeoutMs);
        return true;
    }
}
