// SPDX-License-Identifier: Apache-2.0
//
// producer/synth.h re-implemented from its comment: frame content that depends only on
// (frame id, seed), so ingest-verify regenerates and compares every byte of a manifest
// line "frame_id wafer length crc32c synth:SEED".
using System.Buffers.Binary;
using System.Text;

namespace H3000.TestCommon;

public static class Synth
{
    private const ulong G = 0x9e3779b97f4a7c15;

    public static ulong Mix64(ulong z)
    {
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
        z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
        return z ^ (z >> 31);
    }

    /// <summary>64-bit FNV-1a of the id's UTF-8 bytes.</summary>
    public static ulong Key(string frameId)
    {
        ulong h = 0xcbf29ce484222325;
        foreach (byte b in Encoding.UTF8.GetBytes(frameId))
        {
            h ^= b;
            h *= 0x100000001b3;
        }
        return h;
    }

    public static void Fill(Span<byte> dst, ulong n, ulong seed)
    {
        ulong key = Mix64(seed ^ Mix64(n + G));
        Span<byte> w = stackalloc byte[8];
        int j = 0;
        for (ulong i = 0; j < dst.Length; i++)
        {
            ulong word = Mix64(key + (i + 1) * G);
            if (dst.Length - j >= 8)
            {
                BinaryPrimitives.WriteUInt64LittleEndian(dst.Slice(j, 8), word);
                j += 8;
            }
            else
            {
                BinaryPrimitives.WriteUInt64LittleEndian(w, word);
                w[..(dst.Length - j)].CopyTo(dst[j..]);
                j = dst.Length;
            }
        }
    }

    public static byte[] Bytes(string frameId, int length, ulong seed)
    {
        var b = new byte[length];
        Fill(b, Key(frameId), seed);
        return b;
    }

    /// <summary>ing_id_escape: bytes &lt;= 0x20, '%' and &gt;= 0x7f as %XX.</summary>
    public static string Escape(string id)
    {
        var sb = new StringBuilder();
        foreach (byte b in Encoding.UTF8.GetBytes(id))
        {
            if (b <= 0x20 || b == (byte)'%' || b >= 0x7f)
                sb.Append('%').Append(b.ToString("X2", System.Globalization.CultureInfo.InvariantCulture));
            else
                sb.Append((char)b);
        }
        return sb.ToString();
    }

    /// <summary>An ingest-verify manifest (v2) of (frame id, wafer, length, crc32c) lines with synth:seed.</summary>
    public static void WriteManifest(string path, IEnumerable<(string FrameId, string Wafer, long Length, uint Crc)> frames, ulong seed)
    {
        using var w = new StreamWriter(path);
        w.WriteLine("# ingest-send manifest v2: frame_id wafer length crc32c source");
        foreach (var f in frames)
            w.WriteLine($"{Escape(f.FrameId)} {Escape(f.Wafer.Length == 0 ? "default" : f.Wafer)} {f.Length} {f.Crc:x8} synth:{seed}");
    }
}
