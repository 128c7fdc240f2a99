// SPDX-License-Identifier: Apache-2.0
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading.Channels;

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
/// <para>Thread-safe: calls are serialized on the one native handle (libingest's rule).</para>
/// </summary>
public sealed class Producer : IAsyncDisposable, IDisposable
{
    private const int EAGAIN = 11, ENOBUFS = 105, EPIPE = 32, EINVAL = 22;
    private const int AckBurst = 64;

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
    private readonly SemaphoreSlim _credit = new(0, int.MaxValue);
    private readonly SemaphoreSlim _work = new(0, int.MaxValue);
    private int _disposed;

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

    /// <summary>The loaded libingest's version ("1.3.0").</summary>
    public static unsafe string LibraryVersion => Native.Utf8(Native.ing_version_string());

    /// <summary>
    /// Connects, negotiates and sets up RDMA when chosen (blocking, up to the connect
    /// timeout). Throws <see cref="IngestException"/> with libingest's reason.
    /// </summary>
    public static unsafe Producer Connect(ProducerOptions options)
    {
        ArgumentNullException.ThrowIfNull(options);
        if (string.IsNullOrEmpty(options.Server) && options.Servers is not { Count: > 0 })
            throw new ArgumentException("ProducerOptions.Server (\"host:port\") or Servers is required", nameof(options));
        if (options.PoolFrames < 0 || options.PoolFrameSize < 0 || options.Credits < 0 || options.ChunkSize < 0)
            throw new ArgumentOutOfRangeException(nameof(options), "PoolFrames, PoolFrameSize, Credits and ChunkSize cannot be negative");
        Native.EnsureLoaded();
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
            o.server = S(options.Server);
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
            o.rdma_device = S(options.RdmaDevice);
            o.chunk_size = (uint)options.ChunkSize;
            o.auth_token = S(options.AuthToken);
            if (options.Tls is { } tls)
            {
                o.tls_ca = S(tls.CaFile);
                o.tls_cert = S(tls.CertFile);
                o.tls_key = S(tls.KeyFile);
                o.tls_server_name = S(tls.ServerName);
            }
            if (options.Servers is { Count: > 0 } servers)
                o.servers = S(string.Join(',', servers));
            o.ack_deadline_ms = Ms(options.AckDeadline);
            o.keepalive_ms = Ms(options.Keepalive);
            o.node_cooldown_ms = Ms(options.NodeCooldown);
            o.membership_refresh_ms = Ms(options.MembershipRefresh);

            byte* err = stackalloc byte[512];
            err[0] = 0;
            IntPtr p = Native.ing_producer_connect(&o, err, 512);
            if (p == IntPtr.Zero)
            {
                string why = Native.Utf8(err);
                string where = options.Server ?? string.Join(',', options.Servers!);
                throw new IngestException($"connect to {where}: {(why.Length > 0 ? why : "failed")}", 0, ConnectRetryable(why));
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

    /// <summary><see cref="Connect"/> on a pool thread.</summary>
    public static Task<Producer> ConnectAsync(ProducerOptions options, CancellationToken cancellationToken = default) =>
        Task.Run(() => Connect(options), cancellationToken);

    // Refusals that name the peer, the network or time may pass on a later attempt; a bad
    // option, token or certificate will not.
    private static bool ConnectRetryable(string why) =>
        !why.Contains("UNAUTHENTICATED", StringComparison.Ordinal) &&
        !why.Contains("PERMISSION_DENIED", StringComparison.Ordinal) &&
        !why.Contains("certificate", StringComparison.OrdinalIgnoreCase) &&
        !why.Contains("option", StringComparison.OrdinalIgnoreCase) && (
        why.Contains("refused", StringComparison.OrdinalIgnoreCase) ||
        why.Contains("timed out", StringComparison.OrdinalIgnoreCase) ||
        why.Contains("timeout", StringComparison.OrdinalIgnoreCase) ||
        why.Contains("unreachable", StringComparison.OrdinalIgnoreCase) ||
        why.Contains("reset", StringComparison.OrdinalIgnoreCase) ||
        why.Contains("UNAVAILABLE", StringComparison.Ordinal) ||
        why.Contains("RESOURCE_EXHAUSTED", StringComparison.Ordinal));

    internal bool IsDisposed => Volatile.Read(ref _disposed) != 0;

    /// <summary>The transport in use: Rdma (READ or WRITE push) or Grpc.</summary>
    public Transport ActualTransport
    {
        get { lock (_gate) { ThrowIfDisposed(); return Native.ing_producer_transport(_h) == 1 ? Transport.Rdma : Transport.Grpc; } }
    }
    /// <summary>Why this transport (e.g. why RDMA is not used).</summary>
    public unsafe string TransportNote
    {
        get { lock (_gate) { ThrowIfDisposed(); return Native.Utf8(Native.ing_producer_transport_note(_h)); } }
    }
    public ulong SessionId { get { lock (_gate) { ThrowIfDisposed(); return Native.ing_producer_session_id(_h); } } }
    /// <summary>The largest frame the node takes from this session.</summary>
    public long MaxFrameSize { get { lock (_gate) { ThrowIfDisposed(); return (long)Native.ing_producer_max_frame(_h); } } }
    /// <summary>Frames in flight the node allows this session.</summary>
    public int Credits { get { lock (_gate) { ThrowIfDisposed(); return (int)Native.ing_producer_credits(_h); } } }
    /// <summary>Frames submitted whose final ack has not been polled yet.</summary>
    public int InFlight => Volatile.Read(ref _inFlight);

    public unsafe ProducerStats GetStats()
    {
        lock (_gate)
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
        lock (_gate)
        {
            ThrowIfDisposed();
            byte* p = (byte*)Native.ing_frame_alloc(_h, (nuint)length);
            if (p == null)
                return null;
            if (_buffers.TryGetValue((IntPtr)p, out FrameBuffer? b))
            {
                b.Length = length;
                b.IsRented = true;
                b.ReleasePending = false;
                return b;
            }
            b = new FrameBuffer(this, p, length);
            _buffers[(IntPtr)p] = b;
            return b;
        }
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
        lock (_gate)
        {
            if (!b.IsRented || IsDisposed)
                return;
            if (b.InFlight)
            {
                b.ReleasePending = true;
                return;
            }
            b.IsRented = false;
            Native.ing_frame_free(_h, b.Pointer);
        }
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
        lock (_gate)
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
        if (_pump != null)
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
        while (!TrySubmit(buffer, length, frameId, waferId, timestamp, crc32c))
        {
            if (_pump != null)
                _credit.Wait(100);
            else
                PollIntoPending(10);
        }
    }

    /// <summary><see cref="TrySubmit"/>, waiting asynchronously for a credit (starts the ack pump).</summary>
    public async ValueTask SubmitAsync(FrameBuffer buffer, int length, string frameId, string? waferId = null,
                                       long timestamp = 0, uint? crc32c = null,
                                       CancellationToken cancellationToken = default)
    {
        EnsurePump();
        while (!TrySubmit(buffer, length, frameId, waferId, timestamp, crc32c))
            await _credit.WaitAsync(100, cancellationToken).ConfigureAwait(false);
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

    // under _gate
    private unsafe int PollNative(Span<Ack> dst, int timeoutMs)
    {
        int max = Math.Min(dst.Length, AckBurst);
        int n = Native.ing_producer_poll_sz(_h, _acks, (uint)max, (nuint)sizeof(Native.ing_ack), timeoutMs);
        if (n < 0)
        {
            string lib = Native.Utf8(Native.ing_strerror(n));
            throw new IngestException($"poll: {lib}: the connection to the node broke (frames in flight fail with retryable acks)", n,
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
                    buf.IsRented = false;
                    Native.ing_frame_free(_h, buf.Pointer);
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
        lock (_gate)
        {
            ThrowIfDisposed();
            if (_channel != null)
                return _channel;
            // bounded: a reader that stops reading stops the pump, the credits stay taken,
            // and submitters wait: memory stays bounded
            _channel = Channel.CreateBounded<Ack>(new BoundedChannelOptions(Math.Max(64, _subs.Length * 2))
            {
                SingleWriter = true,
                FullMode = BoundedChannelFullMode.Wait,
            });
            foreach (Ack a in DrainPending())
                _channel.Writer.TryWrite(a);
            _pump = new Thread(PumpLoop) { IsBackground = true, Name = "H3000.Ingest pump" };
            _pump.Start();
            return _channel;
        }
    }

    private List<Ack> DrainPending()
    {
        var l = new List<Ack>(_pendLen);
        for (; _pendLen > 0; _pendLen--, _pendHead = (_pendHead + 1) % _pending.Length)
            l.Add(_pending[_pendHead]);
        return l;
    }

    private void PumpLoop()
    {
        var buf = new Ack[AckBurst];
        Channel<Ack> ch = _channel!;
        try
        {
            while (!_stopping)
            {
                if (Volatile.Read(ref _inFlight) == 0)
                {
                    _work.Wait(50);
                    continue;
                }
                int n;
                lock (_gate)
                {
                    if (_stopping || IsDisposed)
                        break;
                    n = PollNative(buf, 1);
                }
                bool credit = false;
                for (int i = 0; i < n; i++)
                {
                    credit |= buf[i].IsFinal;
                    while (!ch.Writer.TryWrite(buf[i]))
                    {
                        if (_stopping)
                            return;
                        ch.Writer.WaitToWriteAsync().AsTask().Wait(100);
                    }
                }
                if (credit)
                    _credit.Release();
            }
            ch.Writer.TryComplete();
        }
        catch (Exception e)
        {
            ch.Writer.TryComplete(e);
            _credit.Release();
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
    }

    private unsafe void Close()
    {
        _stopping = true;
        _work.Release();
        _pump?.Join();
        lock (_gate)
        {
            if (Interlocked.Exchange(ref _disposed, 1) != 0)
                return;
            _h.CloseTimeoutMs = 0;
            _h.Dispose();
            foreach (FrameBuffer b in _buffers.Values)
            {
                b.IsRented = false;
                b.Submission = -1;
            }
            foreach (IntPtr s in _strings)
                Marshal.FreeCoTaskMem(s);
            _strings.Clear();
            NativeMemory.Free(_acks);
            _acks = null;
        }
        _channel?.Writer.TryComplete();
        _credit.Release();
    }

    private void ThrowIfDisposed() => ObjectDisposedException.ThrowIf(IsDisposed, this);
}
