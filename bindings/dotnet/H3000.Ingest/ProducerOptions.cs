// SPDX-License-Identifier: Apache-2.0
using Microsoft.Extensions.Logging;

namespace H3000.Ingest;

/// <summary>TLS to an ingestd run with --tls-cert/--tls-key (ALPN h2). Paths are PEM files read at connect.</summary>
/// <param name="CaFile">The CA the node's certificate must chain to; the certificate must name the server's host (or <paramref name="ServerName"/>).</param>
/// <param name="CertFile">Client certificate, for a node run with --tls-client-ca.</param>
/// <param name="KeyFile">Its private key.</param>
/// <param name="ServerName">The name to verify instead of the server's host.</param>
public sealed record TlsOptions(string CaFile, string? CertFile = null, string? KeyFile = null, string? ServerName = null);

/// <summary>
/// How to connect (libingest's struct ing_producer_opts). A zero or null value means
/// libingest's default, as in C.
/// </summary>
public sealed record ProducerOptions
{
    /// <summary>
    /// "host:port" of ingestd's gRPC listener (one node); "[v6]:port", and "http://host:port"
    /// (or "https://" with <see cref="Tls"/>) as Grpc.Net.Client takes it, work too. An address
    /// without a port throws <see cref="ArgumentException"/>.
    /// </summary>
    public string? Server { get; init; }
    /// <summary>Fleet mode: several nodes ("host:port" each); wafers are spread by HRW and re-sent on failover. Uses the gRPC stream transport.</summary>
    public IReadOnlyList<string>? Servers { get; init; }
    public Transport Transport { get; init; } = Transport.Auto;
    /// <summary>Frames in flight wanted (0: the node's default).</summary>
    public int Credits { get; init; }
    /// <summary>Largest frame wanted (0: the node's default).</summary>
    public long MaxFrameSize { get; init; }
    /// <summary>Frames of the registered pool <see cref="Producer.Rent"/> hands out (RDMA: one memory registration over all of them).</summary>
    public int PoolFrames { get; init; } = 16;
    /// <summary>Size of each pool frame (default 16 MiB).</summary>
    public long PoolFrameSize { get; init; } = 16L << 20;
    /// <summary>
    /// The stage after which a frame's buffer is the caller's again (<see cref="Ack.ReturnsBuffer"/>).
    /// Default Durable (1.4): a frame lost with a node restart is re-sent from its buffer.
    /// Received gives buffers back sooner; a frame whose connection is lost after RECEIVED
    /// then fails (retryable) instead of being re-sent. Fleet mode: always Durable.
    /// </summary>
    public AckStage RecycleOn { get; init; } = AckStage.Durable;
    public TimeSpan ConnectTimeout { get; init; }
    /// <summary>A frame not DURABLE after this fails locally (libingest's default 60 s).</summary>
    public TimeSpan FrameTimeout { get; init; }
    /// <summary>Shown in ingestd's logs.</summary>
    public string? ClientName { get; init; } = "H3000.Ingest";
    /// <summary>One local RDMA device to use (null: every device; see <see cref="Devices"/>).</summary>
    public string? RdmaDevice { get; init; }
    /// <summary>
    /// The local RDMA devices to use (null: every device of the host). A node with several
    /// rails (one RDMA device each) is reached over every rail one of these devices routes
    /// to: one connection per rail, frames spread by bytes in flight, and a rail that goes
    /// down moves its frames in flight to the others (none fails while one rail is up) until
    /// it is back. Set this or <see cref="RdmaDevice"/>, not both.
    /// </summary>
    public IReadOnlyList<string>? Devices { get; init; }
    /// <summary>Fallback chunk size (0: the node's maxChunkSize).</summary>
    public int ChunkSize { get; init; }
    /// <summary>Shared secret of a node run with --auth-token-file (sent in Negotiate, never logged).</summary>
    public string? AuthToken { get; init; }
    public TlsOptions? Tls { get; init; }
    /// <summary>Fleet: a node holding a frame this long without its DURABLE ack is failed over.</summary>
    public TimeSpan AckDeadline { get; init; }
    /// <summary>HTTP/2 PING period (fleet default 1 s; one server: off).</summary>
    public TimeSpan Keepalive { get; init; }
    /// <summary>Fleet: how long a failed node is left alone.</summary>
    public TimeSpan NodeCooldown { get; init; }
    /// <summary>Fleet: how often membership is asked for.</summary>
    public TimeSpan MembershipRefresh { get; init; }
    /// <summary>
    /// One server: how long a lost connection (the node restarted or was upgraded) is dialled
    /// again, with back-off, while every frame not DURABLE is kept and then re-sent (libingest's
    /// default 30 s). Negative: off, a lost connection fails the frames at once.
    /// </summary>
    public TimeSpan ReconnectTimeout { get; init; }
    /// <summary>
    /// RDMA READ to a node with several rails: a frame of at least this many bytes moves in
    /// parts over every rail at once (still one frame, one CRC, one ack), when the node takes
    /// striped frames of that size too (its own threshold). 0: libingest's default, 8 MiB;
    /// negative: never striped.
    /// </summary>
    public long StripeMin { get; init; }
    /// <summary>
    /// Where libingest's log lines go (its warnings: a lost connection, a fallback, ...), with
    /// their level, instead of the process's stderr. Null: libingest writes them to stderr.
    /// </summary>
    public ILogger? Logger { get; init; }
    /// <summary>How long DisposeAsync waits for frames in flight before it closes (default 30 s).</summary>
    public TimeSpan DrainTimeout { get; init; } = TimeSpan.FromSeconds(30);
}
