// SPDX-License-Identifier: Apache-2.0
using System.Runtime.InteropServices;
using H3000.TestCommon;

namespace H3000.Ingest.Tests;

/// <summary>The mirror structs against the C header, and how the library is found.</summary>
public class NativeTests
{
    // tests/dotnet/layout_dump.c: "NAME sizeof N" and "NAME.FIELD OFFSET" lines
    private static Dictionary<string, long> CLayout()
    {
        var (rc, output) = Support.Run(Path.Combine(IngestNode.BuildDir, "tests", "dotnet_layout_dump"));
        Assert.True(rc == 0, "dotnet_layout_dump: " + output);
        var d = new Dictionary<string, long>();
        foreach (string line in output.Split('\n', StringSplitOptions.RemoveEmptyEntries))
        {
            string[] w = line.Split(' ');
            if (w.Length == 3 && w[1] == "sizeof")
                d[w[0]] = long.Parse(w[2], System.Globalization.CultureInfo.InvariantCulture);
            else if (w.Length == 2)
                d[w[0]] = long.Parse(w[1], System.Globalization.CultureInfo.InvariantCulture);
        }
        return d;
    }

    [Theory]
    [InlineData(typeof(Native.ing_producer_opts))]
    [InlineData(typeof(Native.ing_frame_desc))]
    [InlineData(typeof(Native.ing_ack))]
    [InlineData(typeof(Native.ing_producer_stats))]
    public void Mirror_struct_matches_the_C_header_field_by_field(Type t)
    {
        Dictionary<string, long> c = CLayout();
        Assert.Equal(c[t.Name], Marshal.SizeOf(t));
        var fields = t.GetFields(System.Reflection.BindingFlags.Public | System.Reflection.BindingFlags.Instance);
        int checkedFields = 0;
        foreach (var f in fields)
        {
            string key = t.Name + "." + f.Name;
            Assert.True(c.ContainsKey(key), $"{key}: a field of the mirror that the C struct does not have");
            Assert.True(c[key] == (long)Marshal.OffsetOf(t, f.Name), $"{key}: C offset {c[key]}, C# {Marshal.OffsetOf(t, f.Name)}");
            checkedFields++;
        }
        // and the C struct has no field the mirror lacks
        Assert.Equal(c.Keys.Count(k => k.StartsWith(t.Name + ".", StringComparison.Ordinal)), checkedFields);
    }

    [Fact]
    public void Loads_libingest_so_1_by_its_soname_alone()
    {
        Assert.StartsWith("1.", Producer.LibraryVersion, StringComparison.Ordinal);
        Assert.True(Version.Parse(Producer.LibraryVersion) >= new Version(1, 3, 0), Producer.LibraryVersion);
        string maps = File.ReadAllText("/proc/self/maps");
        string? lib = maps.Split('\n').Select(l => l.Split(' ', StringSplitOptions.RemoveEmptyEntries))
                          .Where(w => w.Length >= 6 && w[5].EndsWith("/libingest.so.1", StringComparison.Ordinal))
                          .Select(w => w[5]).FirstOrDefault();
        Assert.NotNull(lib);
        // run.sh puts only the SONAME on the loader path, as the runtime .deb ships it: no
        // libingest.so (the -dev symlink) next to it
        string only = Environment.GetEnvironmentVariable("ING_RUNTIME_LIB_DIR")
                      ?? throw new InvalidOperationException("ING_RUNTIME_LIB_DIR is not set: run through tests/dotnet/run.sh binding");
        Assert.Equal(Path.Combine(only, "libingest.so.1"), lib);
        Assert.Equal(new[] { "libingest.so.1" }, Directory.GetFiles(only).Select(f => Path.GetFileName(f)).ToArray());
    }

    [Fact]
    public void StripeMin_maps_to_opts_stripe_min()
    {
        Assert.Equal(0ul, Producer.StripeMin(0));                 // libingest's default, 8 MiB
        Assert.Equal(16ul << 20, Producer.StripeMin(16L << 20));  // the producer's own threshold
        Assert.Equal(ulong.MaxValue, Producer.StripeMin(-1));     // ING_STRIPE_OFF: never
        Assert.Equal(ulong.MaxValue, Producer.StripeMin(long.MinValue));
    }

    [Fact]
    public void Crc32c_is_the_Castagnoli_checksum()
    {
        Assert.Equal(0xE3069283u, Producer.Crc32c("123456789"u8));
    }
}
