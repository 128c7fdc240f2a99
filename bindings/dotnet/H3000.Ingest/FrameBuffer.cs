// SPDX-License-Identifier: Apache-2.0
using System.Buffers;

namespace H3000.Ingest;

/// <summary>
/// A frame buffer inside the producer's registered pool (ing_frame_alloc): native memory
/// that the node reads in place over RDMA and that the GC never moves, exposed as
/// <see cref="Memory{T}"/> of bytes. Fill it, submit it, and reuse it once its ack says so
/// (<see cref="Ack.Buffer"/>): while a frame is in flight its bytes belong to the node, and
/// <see cref="GetSpan"/> throws. <see cref="Release"/> (or Dispose) gives it back to the
/// pool. A rented buffer keeps the native pool mapped (a reference on the producer's
/// handle): when the producer is disposed while a task still writes into a span of it, the
/// write lands in valid memory and the next <see cref="GetSpan"/> (or submit) throws
/// <see cref="ObjectDisposedException"/>; the pool (and the session's socket) goes once
/// every such buffer is released: release what you rent (using, or Dispose), as with any
/// pooled memory. No finalizer gives it back: a span can outlive its buffer object.
/// </summary>
public sealed unsafe class FrameBuffer : MemoryManager<byte>
{
    private readonly Producer _owner;

    internal FrameBuffer(Producer owner, byte* ptr, int length)
    {
        _owner = owner;
        Pointer = ptr;
        Length = length;
    }

    internal byte* Pointer { get; }
    /// <summary>Bytes usable (what was rented).</summary>
    public int Length { get; internal set; }
    /// <summary>Rented and not released: false once given back (or its producer disposed).</summary>
    public bool IsRented { get; internal set; } = true;
    /// <summary>A frame from this buffer is in flight: do not touch its bytes.</summary>
    public bool InFlight => Submission >= 0;
    /// <summary>Release was asked while in flight: goes back to the pool with its final ack.</summary>
    internal bool ReleasePending { get; set; }
    internal int Submission { get; set; } = -1;
    internal Producer Owner => _owner;
    /// <summary>Holds a reference on the producer's handle (while rented).</summary>
    internal bool HoldsRef { get; set; }


    public override Span<byte> GetSpan()
    {
        if (!IsRented || _owner.IsDisposed)
            throw new ObjectDisposedException(nameof(FrameBuffer), "this frame buffer was released (or its producer disposed)");
        if (InFlight)
            throw new InvalidOperationException("a frame from this buffer is in flight: its bytes belong to the node until its ack (Ack.Buffer)");
        return new Span<byte>(Pointer, Length);
    }

    /// <summary>Native memory never moves: pinning is a pointer.</summary>
    public override MemoryHandle Pin(int elementIndex = 0)
    {
        if ((uint)elementIndex > (uint)Length)
            throw new ArgumentOutOfRangeException(nameof(elementIndex));
        return new MemoryHandle(Pointer + elementIndex);
    }

    public override void Unpin() { }

    /// <summary>Give the buffer back to the pool now, or with its frame's final ack when in flight.</summary>
    public void Release() => _owner.ReleaseBuffer(this);

    protected override void Dispose(bool disposing)
    {
        if (disposing)
            Release();
    }
}
