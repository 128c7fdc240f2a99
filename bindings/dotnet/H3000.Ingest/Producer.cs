// SPDX-License-Identifier: Apache-2.0
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading.Channels;
using Microsoft.Extensions.Logging;

namespace H3000.Ingest;

/// <summary>
/// One producer session with an ingest node (or a fleet): libingest's struct ing_producer.
/// <para>
/// Frames come from the registered pool (<see cref="Rent"/>), are filled through their
/// <see cref="Memory{T}"/>, submitted with an id, and acknowledged: RECEIVED when the bytes
/// are in the node, DURABLE (<see cref="Ack.Stored"/>) once stored, or a failure. Two ways
/// to get the acks, use one: <see cref="Poll"/> on your own thread (no allocation on the
/// steady path, as libingest's own loop), or <see cref="ReadAcksAsync"/> with
/// <see cref="SubmitAsync"/>, which start a pump thread that drives the connection.
/// </para>
/// <para>Thread-safe: calls are serialized on the one native handle (libingest's rule); a
/// pump waiting in libingest's poll is woken (ing_producer_wake) when another thread needs
/// the handle, never polled in short slices.</para>
/// <para>With one <see cref="ProducerOptions.Server"/>, a node restart or upgrade costs time,
/// not frames: libingest redials for <see cref="ProducerOptions.ReconnectTimeout"/> and
/// re-sends every frame not DURABLE (<see cref="Ack.Resends"/>).</para>
/// </summary>
public sealed class Producer : IAsyncDisposable, IDisposable
{
    private const int EAGAIN = 11, ENOBUFS = 105, EPIPE = 32, EINVAL = 22;
    private const int AckBurst = 64;
    private const int PumpWaitMs = 1000;   // the pump's poll; woken at once when needed

    private readonly ProducerHandle _h;
    private readonly object _gate = new();
    private readonly List<IntPtr> _strings;
    private readonly AckStage _recycleOn;
    private readonly bool _hasStored;          // library >= 1.3 fills ing_ack.stored
    private readonly TimeSpan _drainTimeout;
    private unsafe Native.ing_ack* _acks;             // native burst array for ing_producer_poll
    private readonly Dictionary<IntPtr, FrameBuffer> _buffers = new();

    // frames in flight, by the index libingest hands back in ing_ack.user (index + 1)
    private Submission[] _subs;
    private int[] _freeSubs;
    private int _nfree;
    private int _inFlight;

    // acks polled while a caller waited for a credit, delivered by the next Poll
    private Ack[] _pending = new Ack[64];
    private readonly Ack[] _tmp = new Ack[AckBurst];
    private int _pendHead, _pendLen;

    // pump (ReadAcksAsync / SubmitAsync)
    private Channel<Ack>? _channel;
    private Thread? _pump;
    private volatile bool _stopping;
    // Signalled only when someone waits (a credit waiter counted, the pump marked idle), so
    // neither count grows with the frames sent: a permit left over from a busy hour would
    // turn a later wait into a spin, and 2^31 of them would throw SemaphoreFullException.
    private readonly SemaphoreSlim _credit = new(0, int.MaxValue);
    private readonly SemaphoreSlim _work = new(0, int.MaxValue);
    private int _creditWaiters;   // SubmitAsync, Submit and Drain waiting for a final ack
    private int _pumpIdle;        // the pump waits on _work (nothing in flight)
    private int _disposed;

    // a thread waiting in native poll (pump or Poll) and threads that want the handle: the
    // waiter is woken instead of holding the lock for its whole wait
    private int _inPoll;
    private int _wanters;
    // RentAsync: waiters for a buffer given back
    private readonly SemaphoreSlim _bufferFreed = new(0, int.MaxValue);
    private int _rentWaiters;
    private int _rented;          // buffers rented and not given back (each holds a handle reference)
    private readonly ILogger? _logger;

    /// <summary>Buffers rented from this producer and not given back.</summary>
    internal int RentedCount => Volatile.Read(ref _rented);
    internal bool HandleClosed => _h.IsClosed;
    /// <summary>Permits waiting in the credit and pump semaphores (tests: bounded, never one per frame).</summary>
    internal (int Credit, int Work) Permits => (_credit.CurrentCount, _work.CurrentCount);

    private struct Submission
    {
        public FrameBuffer? Buffer;
        public string FrameId;
        public string WaferId;
    }

    private unsafe Producer(ProducerHandle h, List<IntPtr> strings, ProducerOptions o)
    {
        _h = h;
        _strings = strings;
        _recycleOn = o.Servers is { Count: > 0 } ? AckStage.Durable : o.RecycleOn;
        _logger = o.Logger;
        PoolFrameSize = o.PoolFrameSize <= 0 ? 16L << 20 : (o.PoolFrameSize + 4095) & ~4095L;
        _drainTimeout = o.DrainTimeout;
        _hasStored = Native.ing_version() >= 10300;
        _acks = (Native.ing_ack*)NativeMemory.AllocZeroed((nuint)(AckBurst * sizeof(Native.ing_ack)));
        int n = Math.Max(16, (int)Native.ing_producer_credits(h) * 2);
        _subs = new Submission[n];
        _freeSubs = new int[n];
        for (int i = 0; i < n; i++)
            _freeSubs[i] = n - 1 - i;
        _nfree = n;
    }

    /// <summary>CRC-32C (Castagnoli) as the node checks it; chainable (pass the previous result).</summary>
    public static unsafe uint Crc32c(ReadOnlySpan<byte> data, uint crc = 0)
    {
        fixed (byte* p = data)
            return Native.ing_crc32c(crc, p, (nuint)data.Length);
    }

    /// <summary>The loaded libingest's version ("1.4.0").</summary>
    public static unsafe string LibraryVersion => Native.Utf8(Native.ing_version_string());

    /// <summary>ProducerOptions.StripeMin as libingest's opts.stripe_min: 0 its default (8 MiB), negative ING_STRIPE_OFF (never).</summary>
    internal static ulong StripeMin(long v) => v < 0 ? ulong.MaxValue : (ulong)v;

    /// <summary>The device list libingest takes ("mlx5_0,mlx5_1"), or null for every device.</summary>
    private static string? Devices(ProducerOptions options)
    {
        if (options.Devices is null)
            return options.RdmaDevice;
        if (options.RdmaDevice is not null)
            throw new ArgumentException("set ProducerOptions.Devices or RdmaDevice, not both", nameof(options));
        if (options.Devices.Count == 0)
            throw new ArgumentException("ProducerOptions.Devices is empty (null: every device)", nameof(options));
        foreach (string d in options.Devices)
            if (string.IsNullOrEmpty(d) || d.Length > 63 || d.Any(c => c == ',' || char.IsWhiteSpace(c) || char.IsControl(c)))
                throw new ArgumentException($"ProducerOptions.Devices: '{d}' is not an RDMA device name", nameof(options));
        return string.Join(',', options.Devices);
    }

    /// <summary>
    /// Connects, negotiates and sets up RDMA when chosen (blocking, up to the connect
    /// timeout). Throws <see cref="IngestException"/> with libingest's reason.
    /// </summary>
    public static unsafe Producer Connect(ProducerOptions options)
    {
        ArgumentNullException.ThrowIfNull(options);
        if (string.IsNullOrEmpty(options.Server) && options.Servers is not { Count: > 0 })
            throw new ArgumentException("ProducerOptions.Server (\"host:port\") or Servers is required", nameof(options));
        string? server = options.Server is null ? null : Address.Normalize(options.Server, options.Tls != null, nameof(options));
        string? servers = options.Servers is { Count: > 0 } list
            ? string.Join(',', list.Select(a => Address.Normalize(a, options.Tls != null, nameof(options)))) : null;
        string? devices = Devices(options);
        if (options.PoolFrames < 0 || options.PoolFrameSize < 0 || options.Credits < 0 || options.ChunkSize < 0)
            throw new ArgumentOutOfRangeException(nameof(options), "PoolFrames, PoolFrameSize, Credits and ChunkSize cannot be negative");
        Native.EnsureLoaded();
        NativeLog.Attach(options.Logger);
        var strings = new List<IntPtr>();
        byte* S(string? s)
        {
            if (s is null)
                return null;
            if (s.Contains('\0', StringComparison.Ordinal))
                throw new ArgumentException("an option string holds a NUL character", nameof(options));
            IntPtr p = Marshal.StringToCoTaskMemUTF8(s);
            strings.Add(p);
            return (byte*)p;
        }
        static int Ms(TimeSpan t) => t <= TimeSpan.Zero ? 0 : (int)Math.Min(int.MaxValue, Math.Ceiling(t.TotalMilliseconds));

        try
        {
            Native.ing_producer_opts o;
            Native.ing_producer_opts_init_sz(&o, (nuint)sizeof(Native.ing_producer_opts));
            o.server = S(server);
            (o.transport, o.rdma_mode) = options.Transport switch
            {
                Transport.Auto => (0, 0),
                Transport.Rdma => (1, 1),
                Transport.RdmaWrite => (1, 2),
                Transport.Grpc => (2, 0),
                _ => throw new ArgumentOutOfRangeException(nameof(options), $"unknown transport {options.Transport}"),
            };
            o.credits = (uint)options.Credits;
            o.max_frame_size = (ulong)options.MaxFrameSize;
            if (Ms(options.ConnectTimeout) > 0)
                o.connect_timeout_ms = Ms(options.ConnectTimeout);
            if (Ms(options.FrameTimeout) > 0)
                o.frame_timeout_ms = Ms(options.FrameTimeout);
            o.recycle_on = (int)options.RecycleOn;
            o.client_name = S(options.ClientName);
            o.pool_frames = (uint)options.PoolFrames;
            o.pool_frame_size = (ulong)options.PoolFrameSize;
            o.rdma_device = S(devices);
            o.chunk_size = (uint)options.ChunkSize;
            o.auth_token = S(options.AuthToken);
            if (options.Tls is { } tls)
            {
                o.tls_ca = S(tls.CaFile);
                o.tls_cert = S(tls.CertFile);
                o.tls_key = S(tls.KeyFile);
                o.tls_server_name = S(tls.ServerName);
            }
            o.servers = S(servers);
            o.ack_deadline_ms = Ms(options.AckDeadline);
            o.keepalive_ms = Ms(options.Keepalive);
            o.node_cooldown_ms = Ms(options.NodeCooldown);
            o.membership_refresh_ms = Ms(options.MembershipRefresh);
            o.reconnect_timeout_ms = options.ReconnectTimeout < TimeSpan.Zero ? -1 : Ms(options.ReconnectTimeout);
            o.stripe_min = StripeMin(options.StripeMin);

            byte* err = stackalloc byte[512];
            err[0] = 0;
            IntPtr p = IntPtr.Zero;
            int rc;
            using (NativeLog.Scope(options.Logger))
                rc = Native.ing_producer_open(&p, &o, err, 512);
            if (rc < 0 || p == IntPtr.Zero)
            {
                string why = Native.Utf8(err);
                string where = server ?? servers!;
                // retryability from libingest's code, never from the message's words
                throw new IngestException($"connect to {where}: {(why.Length > 0 ? why : "failed")}", rc,
                                          Native.ing_error_retryable(rc) != 0);
            }
            return new Producer(new ProducerHandle(p), strings, options);
        }
        catch
        {
            foreach (IntPtr s in strings)
                Marshal.FreeCoTaskMem(s);
            throw;
        }
    }

    /// <summary>
    /// <see cref="Connect"/> on a pool thread. Cancelling the token ends the wait at once
    /// (<see cref="OperationCanceledException"/>); a connection that completes after that is
    /// closed, never leaked. The connect itself is bounded by <see cref="ProducerOptions.ConnectTimeout"/>.
    /// </summary>
    public static Task<Producer> ConnectAsync(ProducerOptions options, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(options);
        cancellationToken.ThrowIfCancellationRequested();
        var tcs = new TaskCompletionSource<Producer>(TaskCreationOptions.RunContinuationsAsynchronously);
        CancellationTokenRegistration reg = cancellationToken.Register(() => tcs.TrySetCanceled(cancellationToken));
        _ = Task.Run(() =>
        {
            try
            {
                Producer p = Connect(options);
                if (!tcs.TrySetResult(p))
                    p.Dispose();   // the caller gave up: nobody else will close it
            }
            catch (Exception e)
            {
                tcs.TrySetException(e);
            }
            finally
            {
                reg.Dispose();
            }
        }, CancellationToken.None);
        return tcs.Task;
    }

    internal bool IsDisposed => Volatile.Read(ref _disposed) != 0;

    /// <summary>The transport in use: Rdma (READ or WRITE push) or Grpc.</summary>
    public Transport ActualTransport
    {
        get { using (Gate()) { ThrowIfDisposed(); return Native.ing_producer_transport(_h) == 1 ? Transport.Rdma : Transport.Grpc; } }
    }
    /// <summary>Why this transport (e.g. why RDMA is not used).</summary>
    public unsafe string TransportNote
    {
        get { using (Gate()) { ThrowIfDisposed(); return Native.Utf8(Native.ing_producer_transport_note(_h)); } }
    }
    public ulong SessionId { get { using (Gate()) { ThrowIfDisposed(); return Native.ing_producer_session_id(_h); } } }
    /// <summary>The largest frame the node takes from this session.</summary>
    public long MaxFrameSize { get { using (Gate()) { ThrowIfDisposed(); return (long)Native.ing_producer_max_frame(_h); } } }
    /// <summary>Frames in flight the node allows this session.</summary>
    public int Credits { get { using (Gate()) { ThrowIfDisposed(); return (int)Native.ing_producer_credits(_h); } } }
    /// <summary>Frames submitted whose final ack has not been polled yet.</summary>
    public int InFlight => Volatile.Read(ref _inFlight);

    public unsafe ProducerStats GetStats()
    {
        using (Gate())
        {
            ThrowIfDisposed();
            Native.ing_producer_stats s;
            Native.ing_producer_get_stats_sz(_h, &s, (nuint)sizeof(Native.ing_producer_stats));
            return new ProducerStats(s.submitted, s.received, s.durable, s.failed, s.duplicates, s.bytes,
                                     (int)s.in_flight, s.rerouted, s.failovers, (int)s.nodes, (int)s.nodes_up);
        }
    }

    // ---------------------------------------------------------------- buffers

    /// <summary>A buffer of <paramref name="length"/> bytes from the registered pool, or null when none is free.</summary>
    public unsafe FrameBuffer? TryRent(int length)
    {
        if (length <= 0)
            throw new ArgumentOutOfRangeException(nameof(length), length, "a frame has at least one byte");
        EnterGate();
        try
        {
            ThrowIfDisposed();
            byte* p = (byte*)Native.ing_frame_alloc(_h, (nuint)length);
            if (p == null)
                return null;
            if (!_buffers.TryGetValue((IntPtr)p, out FrameBuffer? b))
            {
                b = new FrameBuffer(this, p, length);
                _buffers[(IntPtr)p] = b;
            }
            b.Length = length;
            b.ReleasePending = false;
            // the pool stays mapped while the buffer is rented: a span handed out by
            // GetSpan can never outlive the memory under it, whatever a dispose does
            bool added = false;
            _h.DangerousAddRef(ref added);
            b.HoldsRef = added;
            b.IsRented = true;
            _rented++;
            return b;
        }
        finally
        {
            ExitGate();
        }
    }

    /// <summary>
    /// A buffer from the registered pool, waiting asynchronously until one is given back
    /// (<see cref="FrameBuffer.Release"/>, or a frame's final ack when it was released in
    /// flight). Throws when the length is above the pool's frame size, or
    /// <see cref="ObjectDisposedException"/> when the producer is disposed meanwhile.
    /// Allocates nothing when a buffer is free.
    /// </summary>
    public ValueTask<FrameBuffer> RentAsync(int length, CancellationToken cancellationToken = default)
    {
        FrameBuffer? b = TryRent(length);
        return b != null ? ValueTask.FromResult(b) : RentSlowAsync(length, cancellationToken);
    }

    private async ValueTask<FrameBuffer> RentSlowAsync(int length, CancellationToken cancellationToken)
    {
        if (length > PoolFrameSize)
            throw new ArgumentOutOfRangeException(nameof(length), length, $"above the pool's frame size, {PoolFrameSize} bytes (ProducerOptions.PoolFrameSize)");
        Interlocked.Increment(ref _rentWaiters);
        try
        {
            for (;;)
            {
                FrameBuffer? b = TryRent(length);
                if (b != null)
                    return b;
                // a release signals; the timeout only bounds a missed signal
                await _bufferFreed.WaitAsync(250, cancellationToken).ConfigureAwait(false);
            }
        }
        finally
        {
            Interlocked.Decrement(ref _rentWaiters);
        }
    }

    /// <summary>Size of each pool frame (the largest <see cref="Rent"/> length).</summary>
    public long PoolFrameSize { get; private set; }

    // a pool slot went back (under _gate): the buffer's handle reference goes, a RentAsync wakes
    private void BufferFreed(FrameBuffer b)
    {
        b.IsRented = false;
        _rented--;
        if (b.HoldsRef)
        {
            b.HoldsRef = false;
            _h.DangerousRelease();
        }
        if (Volatile.Read(ref _rentWaiters) > 0)
            _bufferFreed.Release();
    }

    /// <summary>
    /// A buffer from the registered pool. Throws when none is free (every one rented:
    /// release buffers, or wait for acks) or when the length is above the pool's frame size.
    /// </summary>
    public FrameBuffer Rent(int length) =>
        TryRent(length) ?? throw new IngestException(
            $"no frame buffer of {length} bytes free in the registered pool: every one is rented (release buffers " +
            "or wait for their acks), or the length is above ProducerOptions.PoolFrameSize", -ENOBUFS, retryable: true);

    internal unsafe void ReleaseBuffer(FrameBuffer b)
    {
        EnterGate();
        try
        {
            if (!b.IsRented)
                return;
            if (IsDisposed)
            {
                // the producer is closed: its slot needs no freeing, its reference goes
                // (the last one unmaps the pool)
                BufferFreed(b);
                return;
            }
            if (b.InFlight)
            {
                b.ReleasePending = true;
                return;
            }
            Native.ing_frame_free(_h, b.Pointer);
            BufferFreed(b);
        }
        finally
        {
            ExitGate();
        }
    }

    // The handle's lock, waking a thread that waits in native poll under it first.
    private void EnterGate()
    {
        Interlocked.Increment(ref _wanters);
        if (Volatile.Read(ref _inPoll) != 0 && !_h.IsClosed)
        {
            try
            {
                Native.ing_producer_wake(_h);
            }
            catch (ObjectDisposedException)
            {
            }
        }
        Monitor.Enter(_gate);
    }

    private void ExitGate()
    {
        Monitor.Exit(_gate);
        Interlocked.Decrement(ref _wanters);
    }

    // ---------------------------------------------------------------- submit

    /// <summary>
    /// Announces one frame: the first <paramref name="length"/> bytes of the buffer.
    /// False when no credit is free (poll, then try again). Throws for bad input
    /// (<see cref="ArgumentException"/>: the reason and the rule) or a broken connection
    /// (<see cref="IngestException"/>). Allocates nothing.
    /// </summary>
    /// <param name="buffer">Rented from this producer, not in flight.</param>
    /// <param name="length">Bytes of the buffer that make the frame, 1..buffer.Length.</param>
    /// <param name="frameId">1..256 bytes of UTF-8 without control characters; (wafer, frame) names the frame.</param>
    /// <param name="waferId">Same rule; null or "": the node's wafer "default".</param>
    /// <param name="timestamp">Stored as sent, any unit (0: now, ns).</param>
    /// <param name="crc32c">The frame's CRC-32C (<see cref="Crc32c"/>) when the caller has it
    /// already (computed while the bytes were made, or kept for a buffer sent again): the
    /// library then does not read the frame to compute it. The node checks it against the
    /// bytes it received: a wrong one fails the frame (<see cref="ErrorCode.CrcMismatch"/>,
    /// retryable: the bytes may have been damaged on the way), nothing stored. Null: the library computes it.</param>
    public unsafe bool TrySubmit(FrameBuffer buffer, int length, string frameId, string? waferId = null, long timestamp = 0,
                                 uint? crc32c = null)
    {
        ArgumentNullException.ThrowIfNull(buffer);
        ArgumentNullException.ThrowIfNull(frameId);
        if (buffer.Owner != this)
            throw new ArgumentException("the buffer belongs to another producer: rent it from this one", nameof(buffer));
        if (length <= 0 || length > buffer.Length)
            throw new ArgumentOutOfRangeException(nameof(length), length, $"a frame is 1..{buffer.Length} bytes of its buffer");
        Span<byte> fid = stackalloc byte[Native.IdMax + 1];
        Span<byte> wid = stackalloc byte[Native.IdMax + 1];
        EncodeId(frameId, fid, nameof(frameId));
        bool hasWafer = !string.IsNullOrEmpty(waferId);
        if (hasWafer)
            EncodeId(waferId!, wid, nameof(waferId));
        using (Gate())
        {
            ThrowIfDisposed();
            if (!buffer.IsRented)
                throw new ObjectDisposedException(nameof(FrameBuffer), "the buffer was released: rent another");
            if (buffer.InFlight)
                throw new InvalidOperationException($"the buffer holds frame '{_subs[buffer.Submission].FrameId}', still in flight: wait for its ack");
            if (_nfree == 0)
                GrowSubmissions();
            int si = _freeSubs[_nfree - 1];
            int rc;
            fixed (byte* f = fid)
            fixed (byte* w = wid)
            {
                Native.ing_frame_desc d = default;
                d.frame_id = f;
                d.wafer_id = hasWafer ? w : null;
                d.timestamp = timestamp;
                d.data = buffer.Pointer;
                d.length = (ulong)length;
                d.crc32c = crc32c.GetValueOrDefault();
                d.has_crc = crc32c.HasValue ? 1 : 0;
                d.user = (void*)(nint)(si + 1);
                using (NativeLog.Scope(_logger))
                    rc = Native.ing_producer_submit_sz(_h, &d, (nuint)sizeof(Native.ing_frame_desc));
            }
            if (rc == -EAGAIN)
                return false;
            if (rc < 0)
                throw SubmitError(rc, frameId);
            _nfree--;
            _subs[si] = new Submission { Buffer = buffer, FrameId = frameId, WaferId = waferId ?? "" };
            buffer.Submission = si;
            _inFlight++;
        }
        // an idle pump sleeps on _work: wake it (CompareExchange is the full fence the pump's
        // idle check pairs with: it sees this frame in _inFlight, or this sees its flag)
        if (_pump != null && Interlocked.CompareExchange(ref _pumpIdle, 0, 1) == 1)
            _work.Release();
        return true;
    }

    /// <summary>
    /// <see cref="TrySubmit"/>, waiting for a credit as long as it takes (acks that arrive
    /// meanwhile go to the next <see cref="Poll"/>, or to <see cref="ReadAcksAsync"/>).
    /// </summary>
    public void Submit(FrameBuffer buffer, int length, string frameId, string? waferId = null, long timestamp = 0,
                       uint? crc32c = null)
    {
        if (TrySubmit(buffer, length, frameId, waferId, timestamp, crc32c))
            return;
        Interlocked.Increment(ref _creditWaiters);   // before the next try: no credit freed after it goes unsignalled
        try
        {
            while (!TrySubmit(buffer, length, frameId, waferId, timestamp, crc32c))
            {
                if (_pump != null)
                    _credit.Wait(100);
                else
                    PollIntoPending(10);
            }
        }
        finally
        {
            Interlocked.Decrement(ref _creditWaiters);
        }
    }

    /// <summary><see cref="TrySubmit"/>, waiting asynchronously for a credit (starts the ack pump).</summary>
    public async ValueTask SubmitAsync(FrameBuffer buffer, int length, string frameId, string? waferId = null,
                                       long timestamp = 0, uint? crc32c = null,
                                       CancellationToken cancellationToken = default)
    {
        EnsurePump();
        if (TrySubmit(buffer, length, frameId, waferId, timestamp, crc32c))
            return;
        Interlocked.Increment(ref _creditWaiters);   // before the next try: no credit freed after it goes unsignalled
        try
        {
            while (!TrySubmit(buffer, length, frameId, waferId, timestamp, crc32c))
                await _credit.WaitAsync(100, cancellationToken).ConfigureAwait(false);
        }
        finally
        {
            Interlocked.Decrement(ref _creditWaiters);
        }
    }

    // n final acks went out: wake as many credit waiters (never more permits than waiters)
    private void CreditsFreed(int n)
    {
        int want = Math.Min(Volatile.Read(ref _creditWaiters), n) - _credit.CurrentCount;
        if (want > 0)
            _credit.Release(want);
    }

    private static void EncodeId(string id, Span<byte> dst, string what)
    {
        if (id.Length == 0)
            throw new ArgumentException($"{what} is empty: ids are 1..256 bytes of UTF-8 without control characters", what);
        int n;
        try
        {
            n = Encoding.UTF8.GetByteCount(id);
        }
        catch (EncoderFallbackException)
        {
            n = -1;
        }
        if (n > Native.IdMax)
            throw new ArgumentException($"{what} is {n} bytes of UTF-8: ids are 1..256 bytes", what);
        // a lone surrogate would be replaced by U+FFFD: refuse it rather than send another id
        if (n < 0 || System.Text.Unicode.Utf8.FromUtf16(id, dst, out _, out int written, replaceInvalidSequences: false) != System.Buffers.OperationStatus.Done)
            throw new ArgumentException($"{what} is not valid UTF-16 (a lone surrogate): ids are UTF-8 text", what);
        foreach (char c in id)
        {
            if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0))
                throw new ArgumentException($"{what} holds control character U+{(int)c:X4}: ids are 1..256 bytes of UTF-8 without control characters", what);
        }
        dst[written] = 0;
    }

    private static unsafe IngestException SubmitError(int rc, string frameId)
    {
        string lib = Native.Utf8(Native.ing_strerror(rc));
        return rc switch
        {
            -EINVAL => new IngestException($"frame '{frameId}': {lib}: the length is above MaxFrameSize, or this (wafer, frame) is already in flight", rc, false),
            -EPIPE => new IngestException($"frame '{frameId}': {lib}: the connection to the node is gone (frames in flight failed with retryable acks); connect again", rc, true),
            _ => new IngestException($"frame '{frameId}': {lib}", rc, false),
        };
    }

    private void GrowSubmissions()
    {
        int n = _subs.Length;
        Array.Resize(ref _subs, n * 2);
        Array.Resize(ref _freeSubs, n * 2);
        for (int i = 2 * n - 1; i >= n; i--)
            _freeSubs[_nfree++] = i;
    }

    // ---------------------------------------------------------------- acks

    /// <summary>
    /// Drives I/O for up to <paramref name="timeout"/> and copies up to acks.Length acks
    /// into <paramref name="acks"/>: the count. Call it regularly: on the gRPC fallback it is
    /// what moves the bytes. Throws <see cref="IngestException"/> when the connection broke.
    /// Allocates nothing for frames that went well.
    /// </summary>
    public int Poll(Span<Ack> acks, TimeSpan timeout)
    {
        int ms = timeout <= TimeSpan.Zero ? 0 : (int)Math.Min(int.MaxValue, Math.Ceiling(timeout.TotalMilliseconds));
        if (_pump != null)
            throw new InvalidOperationException("acks go to ReadAcksAsync on this producer (its pump runs): use one of the two");
        lock (_gate)
        {
            ThrowIfDisposed();
            int n = 0;
            while (n < acks.Length && _pendLen > 0)
            {
                acks[n++] = _pending[_pendHead];
                _pending[_pendHead] = default;
                _pendHead = (_pendHead + 1) % _pending.Length;
                _pendLen--;
            }
            if (n > 0)
                return n;
            return PollNative(acks, ms);
        }
    }

    // under _gate (taken with lock, not Gate(): a poller is not a wanter). A wait is woken
    // by any thread that wants the handle (EnterGate), so it may be long.
    private unsafe int PollNative(Span<Ack> dst, int timeoutMs)
    {
        int max = Math.Min(dst.Length, AckBurst);
        int n;
        if (timeoutMs > 0)
        {
            Interlocked.Exchange(ref _inPoll, 1);
            if (Volatile.Read(ref _wanters) > 0)
                timeoutMs = 0;   // someone waits for the lock: one pass, no wait
        }
        try
        {
            using (NativeLog.Scope(_logger))
                n = Native.ing_producer_poll_sz(_h, _acks, (uint)max, (nuint)sizeof(Native.ing_ack), timeoutMs);
        }
        finally
        {
            Volatile.Write(ref _inPoll, 0);
        }
        if (n < 0)
        {
            string lib = Native.Utf8(Native.ing_strerror(n));
            throw new IngestException($"poll: {lib}: the connection to the node broke and did not come back within " +
                                      "ProducerOptions.ReconnectTimeout (frames in flight failed with retryable acks)", n,
                                      retryable: true);
        }
        for (int i = 0; i < n; i++)
            dst[i] = Convert(&_acks[i]);
        return n;
    }

    private unsafe Ack Convert(Native.ing_ack* a)
    {
        int si = (int)(nint)a->user - 1;
        bool ok = a->ok != 0;
        var stage = (AckStage)a->stage;
        bool stored = _hasStored ? a->stored != 0 : ok && stage == AckStage.Durable;
        bool final = stored || !ok || stage == AckStage.Durable;
        string fid, wid;
        FrameBuffer? buf = null;
        bool returns = false;
        if (si >= 0 && si < _subs.Length && _subs[si].FrameId != null)
        {
            ref Submission s = ref _subs[si];
            fid = s.FrameId;
            wid = s.WaferId;
            buf = s.Buffer;
            // the buffer is the caller's again at its recycle stage, or at the end
            if (buf != null && buf.Submission == si && (final || (ok && stage >= _recycleOn)))
            {
                buf.Submission = -1;
                returns = true;
                if (buf.ReleasePending)
                {
                    buf.ReleasePending = false;
                    Native.ing_frame_free(_h, buf.Pointer);
                    BufferFreed(buf);
                }
            }
            if (final)
            {
                s = default;
                _freeSubs[_nfree++] = si;
                _inFlight--;
            }
        }
        else
        {
            fid = Native.Utf8(a->frame_id, Native.IdMax + 1);
            wid = Native.Utf8(a->wafer_id, Native.IdMax + 1);
        }
        string msg = ok ? "ok" : Native.Utf8(a->msg, 512);
        return new Ack(buf, fid, wid, stage, ok, stored, (ErrorCode)a->code, a->retryable != 0, a->duplicate != 0,
                       a->crc32c, a->latency_ns, a->node_latency_ns, msg, (int)a->resends, returns);
    }

    // under or outside _gate: acks for a later Poll while the caller waits for a credit
    private void PollIntoPending(int timeoutMs)
    {
        lock (_gate)
        {
            ThrowIfDisposed();
            Ack[] tmp = _tmp;
            int n = PollNative(tmp, timeoutMs);
            for (int i = 0; i < n; i++)
            {
                if (_pendLen == _pending.Length)
                {
                    var bigger = new Ack[_pending.Length * 2];
                    for (int k = 0; k < _pendLen; k++)
                        bigger[k] = _pending[(_pendHead + k) % _pending.Length];
                    _pending = bigger;
                    _pendHead = 0;
                }
                _pending[(_pendHead + _pendLen) % _pending.Length] = tmp[i];
                _pendLen++;
            }
        }
    }

    /// <summary>
    /// Every ack from now on, as it comes (starts a pump thread that drives the connection;
    /// <see cref="Poll"/> is then off). Ends when the producer is disposed; a broken
    /// connection ends it with <see cref="IngestException"/>.
    /// </summary>
    public async IAsyncEnumerable<Ack> ReadAcksAsync([EnumeratorCancellation] CancellationToken cancellationToken = default)
    {
        Channel<Ack> ch = EnsurePump();
        while (await ch.Reader.WaitToReadAsync(cancellationToken).ConfigureAwait(false))
        {
            while (ch.Reader.TryRead(out Ack a))
                yield return a;
        }
    }

    private Channel<Ack> EnsurePump()
    {
        // once started, the pump stays: no lock (taking it would knock the pump out of its
        // wait for nothing, on every SubmitAsync)
        Channel<Ack>? started = Volatile.Read(ref _channel);
        if (started != null)
        {
            ThrowIfDisposed();
            return started;
        }
        using (Gate())
        {
            ThrowIfDisposed();
            if (_channel != null)
                return _channel;
            // bounded: a reader that stops reading stops the pump, the credits stay taken,
            // and submitters wait: memory stays bounded
            var ch = Channel.CreateBounded<Ack>(new BoundedChannelOptions(Math.Max(64, _subs.Length * 2))
            {
                SingleWriter = true,
                FullMode = BoundedChannelFullMode.Wait,
            });
            foreach (Ack a in DrainPending())
                ch.Writer.TryWrite(a);
            // the channel as the thread's argument, not a lambda's capture: a closure here would
            // be allocated on every call of this method, fast path included
            var pump = new Thread(PumpLoop) { IsBackground = true, Name = "H3000.Ingest pump" };
            pump.Start(ch);
            _pump = pump;   // started: Close may Join it
            Volatile.Write(ref _channel, ch);   // published last: the fast path above sees a running pump
            return ch;
        }
    }

    private List<Ack> DrainPending()
    {
        var l = new List<Ack>(_pendLen);
        for (; _pendLen > 0; _pendLen--, _pendHead = (_pendHead + 1) % _pending.Length)
            l.Add(_pending[_pendHead]);
        return l;
    }

    private void PumpLoop(object? state)
    {
        var ch = (Channel<Ack>)state!;
        var buf = new Ack[AckBurst];
        try
        {
            while (!_stopping)
            {
                if (Volatile.Read(ref _inFlight) == 0)
                {
                    // idle: say so before the last look (a full fence each side, so a
                    // submit either sees the flag or is seen here), then sleep until a
                    // submit or the dispose signals
                    Interlocked.Exchange(ref _pumpIdle, 1);
                    bool signalled = Volatile.Read(ref _inFlight) == 0 && !_stopping && _work.Wait(PumpWaitMs);
                    if (Interlocked.Exchange(ref _pumpIdle, 0) == 0 && !signalled)
                        _work.Wait(PumpWaitMs);   // a submit took the flag: its permit comes now, take it (never left over)
                    continue;
                }
                // a thread that wants the handle goes first (it woke our last wait)
                var sw = new SpinWait();
                while (Volatile.Read(ref _wanters) > 0 && !_stopping)
                    sw.SpinOnce();
                int n;
                lock (_gate)
                {
                    if (_stopping || IsDisposed)
                        break;
                    n = PollNative(buf, PumpWaitMs);
                }
                int finals = 0;
                for (int i = 0; i < n; i++)
                {
                    finals += buf[i].IsFinal ? 1 : 0;
                    while (!ch.Writer.TryWrite(buf[i]))
                    {
                        if (_stopping)
                            return;
                        ch.Writer.WaitToWriteAsync().AsTask().Wait(100);
                    }
                }
                if (finals > 0)
                    CreditsFreed(finals);
            }
            ch.Writer.TryComplete();
        }
        catch (Exception e)
        {
            ch.Writer.TryComplete(e);
            _credit.Release(Math.Max(1, Volatile.Read(ref _creditWaiters)));
        }
    }

    // ---------------------------------------------------------------- dispose

    /// <summary>
    /// Waits up to <see cref="ProducerOptions.DrainTimeout"/> for the frames in flight (their
    /// acks still reach <see cref="Poll"/>'s pending queue or <see cref="ReadAcksAsync"/>),
    /// then closes the session: frames still in flight then are failed by the library, and
    /// every <see cref="FrameBuffer"/> of this producer is invalid.
    /// </summary>
    public async ValueTask DisposeAsync()
    {
        if (IsDisposed)
            return;
        await Task.Run(Drain).ConfigureAwait(false);
        Close();
    }

    /// <summary>As <see cref="DisposeAsync"/>, blocking.</summary>
    public void Dispose()
    {
        if (IsDisposed)
            return;
        Drain();
        Close();
    }

    private void Drain()
    {
        long end = Environment.TickCount64 + (long)_drainTimeout.TotalMilliseconds;
        Interlocked.Increment(ref _creditWaiters);   // woken by each batch of final acks
        try
        {
            while (Volatile.Read(ref _inFlight) > 0 && Environment.TickCount64 < end)
            {
                if (_pump != null)
                    _credit.Wait(50);
                else
                    PollIntoPending(20);
            }
        }
        catch (IngestException)
        {
            // connection broken: nothing more will come; close below
        }
        catch (ObjectDisposedException)
        {
        }
        finally
        {
            Interlocked.Decrement(ref _creditWaiters);
        }
    }

    private unsafe void Close()
    {
        _stopping = true;
        _work.Release();
        if (_pump != null && Volatile.Read(ref _inPoll) != 0 && !_h.IsClosed)
            Native.ing_producer_wake(_h);
        _pump?.Join();
        using (Gate())
        {
            if (Interlocked.Exchange(ref _disposed, 1) != 0)
                return;
            _h.CloseTimeoutMs = 0;
            _h.Logger = _logger;
            // the session closes now; the pool stays mapped until every rented buffer is
            // given back (each holds a reference on the handle): a span a writer task
            // still holds stays valid memory, and its next GetSpan says ObjectDisposed
            foreach (FrameBuffer b in _buffers.Values)
            {
                if (b.IsRented && b.InFlight)
                    BufferFreed(b);   // the library's now: nobody may touch its bytes
                b.Submission = -1;
            }
            _buffers.Clear();
            _h.Dispose();
            foreach (IntPtr s in _strings)
                Marshal.FreeCoTaskMem(s);
            _strings.Clear();
            NativeMemory.Free(_acks);
            _acks = null;
        }
        _channel?.Writer.TryComplete();
        _credit.Release(Math.Max(1, Volatile.Read(ref _creditWaiters)));   // every waiter sees the dispose
        _bufferFreed.Release();   // a RentAsync waiting: it sees the dispose
    }

    private void ThrowIfDisposed() => ObjectDisposedException.ThrowIf(IsDisposed, this);

    private GateScope Gate()
    {
        EnterGate();
        return new GateScope(this);
    }

    private readonly struct GateScope(Producer p) : IDisposable
    {
        public void Dispose() => p.ExitGate();
    }
}
