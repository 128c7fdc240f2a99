// SPDX-License-Identifier: Apache-2.0
using System.Diagnostics.CodeAnalysis;

namespace H3000.Ingest;

/// <summary>How the bytes move (libingest's transport and RDMA mode).</summary>
public enum Transport
{
    /// <summary>RDMA READ when both sides can, else the gRPC fallback (the reason is in <see cref="Producer.TransportNote"/>).</summary>
    Auto = 0,
    /// <summary>RDMA READ (the node pulls from the registered frame pool), or fail.</summary>
    Rdma,
    /// <summary>RDMA WRITE push into a slot the node grants, or fail (RDMA READ where the node has push off).</summary>
    RdmaWrite,
    /// <summary>Always the gRPC fallback (PushFrames).</summary>
    Grpc,
}

/// <summary>The stage an <see cref="Ack"/> reports.</summary>
public enum AckStage
{
    /// <summary>A failure before any stage was reached.</summary>
    None = 0,
    /// <summary>All bytes are in the node: the frame's buffer may be reused.</summary>
    Received = 1,
    /// <summary>Written, synced and catalogued on the node.</summary>
    Durable = 2,
}

/// <summary>Why a frame failed: the wire's h3000.ErrorCode (libingest's enum ing_error).</summary>
public enum ErrorCode
{
    None = 0,
    InvalidArgument = 1,
    TooLarge = 2,
    CrcMismatch = 3,
    DuplicateConflict = 4,
    Deadline = 5,
    Transfer = 6,
    IO = 7,
    NoSpace = 8,
    NoTransport = 9,
    Busy = 10,
    Cancelled = 11,
    Internal = 12,
    ShuttingDown = 13,
}

/// <summary>
/// One acknowledgement of a submitted frame. A value type that allocates nothing for a
/// frame that went well: the ids are the strings given to <see cref="Producer.TrySubmit"/>,
/// and only a failure's message is decoded from the native ack.
/// </summary>
public readonly struct Ack
{
    internal Ack(FrameBuffer? buffer, string frameId, string waferId, AckStage stage, bool ok, bool stored,
                 ErrorCode code, bool retryable, bool duplicate, uint crc32c, ulong latencyNs,
                 ulong nodeLatencyNs, string message, int resends, bool returnsBuffer)
    {
        ReturnsBuffer = returnsBuffer;
        Buffer = buffer;
        FrameId = frameId;
        WaferId = waferId;
        Stage = stage;
        Ok = ok;
        Stored = stored;
        Code = code;
        Retryable = retryable;
        Duplicate = duplicate;
        Crc32c = crc32c;
        LatencyNs = latencyNs;
        NodeLatencyNs = nodeLatencyNs;
        Message = message;
        Resends = resends;
    }

    /// <summary>
    /// This ack gave the frame's buffer back to the caller (its recycle stage, RECEIVED by
    /// default, or the end of the frame): fill and submit it again, or give it back to the
    /// pool (<see cref="FrameBuffer.Release"/>) for <see cref="Producer.RentAsync"/>. True on
    /// exactly one ack per submission; <see cref="Buffer"/> is then not null.
    /// </summary>
    [MemberNotNullWhen(true, nameof(Buffer))]
    public bool ReturnsBuffer { get; }
    /// <summary>The buffer the frame was submitted from.</summary>
    public FrameBuffer? Buffer { get; }
    /// <summary>The frame's id as submitted.</summary>
    public string FrameId { get; }
    /// <summary>The wafer as submitted ("" for the node's default wafer).</summary>
    public string WaferId { get; }
    /// <summary>The stage reached; <see cref="AckStage.None"/> or <see cref="AckStage.Received"/> with Ok false on a failure.</summary>
    public AckStage Stage { get; }
    /// <summary>This stage was reached (false: the frame failed; see <see cref="Code"/> and <see cref="Message"/>).</summary>
    public bool Ok { get; }
    /// <summary>The node holds the frame: DURABLE and ok (a duplicate of a stored frame too). The one thing to check before the bytes are dropped for good.</summary>
    public bool Stored { get; }
    /// <summary>The frame's last ack: stored or failed. Its buffer is the caller's again.</summary>
    public bool IsFinal => Stored || !Ok;
    public ErrorCode Code { get; }
    /// <summary>Sending the frame again may succeed (node busy, disk full, connection lost...).</summary>
    public bool Retryable { get; }
    /// <summary>Already stored with the same checksum: not rewritten.</summary>
    public bool Duplicate { get; }
    /// <summary>CRC-32C the node computed (0 when not known).</summary>
    public uint Crc32c { get; }
    /// <summary>Submit to this ack on the producer's clock, ns.</summary>
    public ulong LatencyNs { get; }
    /// <summary>The node's own time from admission to this stage, ns (0: not said).</summary>
    public ulong NodeLatencyNs { get; }
    /// <summary>"ok", or the node's (or the library's) reason for a failure.</summary>
    public string Message { get; }
    /// <summary>Times the frame was sent again: fleet mode to another node, one server after a reconnect.</summary>
    public int Resends { get; }

    public override string ToString() =>
        $"{FrameId}: {Stage} ok={Ok} stored={Stored}{(Ok ? "" : $" {Code}{(Retryable ? " (retryable)" : "")}: {Message}")}";
}

/// <summary>Counters of one producer (libingest's struct ing_producer_stats).</summary>
public readonly record struct ProducerStats(
    ulong Submitted, ulong Received, ulong Durable, ulong Failed, ulong Duplicates, ulong Bytes,
    int InFlight, ulong Rerouted, ulong Failovers, int Nodes, int NodesUp);

/// <summary>
/// A failure of the library: its message (libingest's own words, ing_strerror) and
/// whether trying again can help.
/// </summary>
[SuppressMessage("Design", "CA1032:Implement standard exception constructors", Justification = "always carries code and retryability")]
public sealed class IngestException : Exception
{
    internal IngestException(string message, int errno, bool retryable) : base(message)
    {
        Errno = errno;
        Retryable = retryable;
        ErrorCode = FromErrno(errno);
    }

    /// <summary>The negative errno libingest returned (0 where it gave text only).</summary>
    public int Errno { get; }
    /// <summary>What failed, to switch on (libingest's code, never its message's words).</summary>
    public IngestErrorCode ErrorCode { get; }

    private static IngestErrorCode FromErrno(int errno) => -errno switch
    {
        0 => IngestErrorCode.None,
        22 => IngestErrorCode.InvalidArgument,        // EINVAL
        95 => IngestErrorCode.NotSupported,           // EOPNOTSUPP
        111 => IngestErrorCode.ConnectionRefused,     // ECONNREFUSED
        110 => IngestErrorCode.TimedOut,              // ETIMEDOUT
        113 or 101 or 112 or 100 => IngestErrorCode.Unreachable, // EHOSTUNREACH ENETUNREACH EHOSTDOWN ENETDOWN
        104 or 32 or 103 or 108 => IngestErrorCode.ConnectionLost, // ECONNRESET EPIPE ECONNABORTED ESHUTDOWN
        13 => IngestErrorCode.Unauthenticated,        // EACCES
        71 => IngestErrorCode.ProtocolError,          // EPROTO
        105 => IngestErrorCode.NoBuffer,              // ENOBUFS
        11 => IngestErrorCode.NoCredit,               // EAGAIN
        12 => IngestErrorCode.OutOfMemory,            // ENOMEM
        14 => IngestErrorCode.NotInPool,              // EFAULT
        _ => IngestErrorCode.Other,
    };
    /// <summary>A later attempt may succeed (no credit now, connection refused or lost, timeout).</summary>
    public bool Retryable { get; }
}

/// <summary>What an <see cref="IngestException"/> is about (from libingest's errno).</summary>
public enum IngestErrorCode
{
    /// <summary>No code (a failure described by text only).</summary>
    None = 0,
    /// <summary>A bad option, address or argument: fix the call.</summary>
    InvalidArgument,
    /// <summary>An option or transport this library or host cannot do (e.g. RDMA without a device).</summary>
    NotSupported,
    /// <summary>Nothing listens at the address (is ingestd running there?). Retryable.</summary>
    ConnectionRefused,
    /// <summary>No answer in time. Retryable.</summary>
    TimedOut,
    /// <summary>No route to the host, or its name does not resolve. Retryable.</summary>
    Unreachable,
    /// <summary>The connection broke (and, with one server, did not come back within ReconnectTimeout). Retryable.</summary>
    ConnectionLost,
    /// <summary>The node refused the auth token (UNAUTHENTICATED).</summary>
    Unauthenticated,
    /// <summary>The peer is not an ingest node of this protocol, or TLS failed.</summary>
    ProtocolError,
    /// <summary>No frame buffer free in the registered pool. Retryable.</summary>
    NoBuffer,
    /// <summary>No credit free now. Retryable.</summary>
    NoCredit,
    /// <summary>Out of memory (the frame pool).</summary>
    OutOfMemory,
    /// <summary>RDMA: the frame is not in the registered pool.</summary>
    NotInPool,
    /// <summary>Another errno: see <see cref="IngestException.Errno"/>.</summary>
    Other,
}

/// <summary>
/// An ingest node's address as the options take it: "host:port", "[v6]:port", or the
/// Grpc.Net.Client habit "http://host:port" ("https://" with TLS options).
/// </summary>
internal static class Address
{
    internal static string Normalize(string address, bool tls, string param)
    {
        string a = address.Trim();
        if (a.StartsWith("http://", StringComparison.OrdinalIgnoreCase))
        {
            if (tls)
                throw new ArgumentException($"'{address}': http:// is cleartext but ProducerOptions.Tls is set: use https:// or host:port", param);
            a = a[7..];
        }
        else if (a.StartsWith("https://", StringComparison.OrdinalIgnoreCase))
        {
            if (!tls)
                throw new ArgumentException($"'{address}': https:// needs ProducerOptions.Tls (the CA of the node's certificate)", param);
            a = a[8..];
        }
        else if (a.Contains("://", StringComparison.Ordinal))
        {
            throw new ArgumentException($"'{address}': an ingest node's address is \"host:port\" (or http://host:port)", param);
        }
        a = a.TrimEnd('/');
        if (a.Contains('/', StringComparison.Ordinal))
            throw new ArgumentException($"'{address}': an ingest node's address has no path: \"host:port\"", param);
        int colon;
        if (a.StartsWith('['))
        {
            int close = a.IndexOf(']', StringComparison.Ordinal);
            colon = close > 1 && close + 1 < a.Length && a[close + 1] == ':' ? close + 1 : -1;
        }
        else
        {
            colon = a.IndexOf(':', StringComparison.Ordinal);
            if (colon >= 0 && a.LastIndexOf(':') != colon)
                throw new ArgumentException($"'{address}': an IPv6 address goes in brackets: \"[v6]:port\"", param);
        }
        if (colon <= 0)
            throw new ArgumentException($"'{address}' has no port: an ingest node's address is \"host:port\" (ingestd listens on 50051 by default: \"{a}:50051\")", param);
        if (!int.TryParse(a.AsSpan(colon + 1), System.Globalization.NumberStyles.None, System.Globalization.CultureInfo.InvariantCulture, out int port) ||
            port < 1 || port > 65535)
            throw new ArgumentException($"'{address}': the port must be 1..65535", param);
        return a;
    }
}
