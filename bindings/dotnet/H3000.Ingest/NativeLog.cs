// SPDX-License-Identifier: Apache-2.0
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using Microsoft.Extensions.Logging;

namespace H3000.Ingest;

/// <summary>
/// libingest's log lines (ing_log_set_handler: level, component, message) into the
/// <see cref="ILogger"/> of the producer whose call logs them. The native handler is
/// process-wide and runs on the thread that drives a producer: each native call that can
/// log sets that producer's logger for its thread (<see cref="Scope"/>, a struct: nothing
/// allocated); a line outside any scope goes to the most recent logger given. Until a
/// producer is connected with a logger, libingest writes its own lines to stderr.
/// libingest's level (ing_log_set_level) follows the most verbose level any logger given
/// has enabled, so a line no logger wants is never formatted.
/// </summary>
internal static unsafe class NativeLog
{
    [ThreadStatic]
    private static ILogger? t_current;
    private static volatile ILogger? s_last;
    private static int s_installed;
    private static int s_level = -1;
    private static readonly Lock s_gate = new();

    private static readonly Action<ILogger, string, string, Exception?>[] s_write =
    [
        LoggerMessage.Define<string, string>(LogLevel.Error, new EventId(1, "libingest"), "libingest {Component}: {Message}"),
        LoggerMessage.Define<string, string>(LogLevel.Warning, new EventId(1, "libingest"), "libingest {Component}: {Message}"),
        LoggerMessage.Define<string, string>(LogLevel.Information, new EventId(1, "libingest"), "libingest {Component}: {Message}"),
        LoggerMessage.Define<string, string>(LogLevel.Debug, new EventId(1, "libingest"), "libingest {Component}: {Message}"),
    ];

    /// <summary>A producer connects with <paramref name="logger"/>: install the handler, widen the level.</summary>
    internal static void Attach(ILogger? logger)
    {
        if (logger is null)
            return;
        s_last = logger;
        int want = logger.IsEnabled(LogLevel.Debug) ? 3 : logger.IsEnabled(LogLevel.Information) ? 2
                 : logger.IsEnabled(LogLevel.Warning) ? 1 : 0;
        lock (s_gate)
        {
            if (Interlocked.Exchange(ref s_installed, 1) == 0)
                Native.ing_log_set_handler(&OnLine, null);
            if (want > s_level)
            {
                s_level = want;
                Native.ing_log_set_level(want);
            }
        }
    }

    /// <summary>Lines of native calls on this thread go to <paramref name="logger"/> until disposed.</summary>
    internal static ScopeToken Scope(ILogger? logger)
    {
        ILogger? prev = t_current;
        if (logger != null)
            t_current = logger;
        return new ScopeToken(prev, logger != null);
    }

    internal readonly struct ScopeToken(ILogger? prev, bool set) : IDisposable
    {
        public void Dispose()
        {
            if (set)
                t_current = prev;
        }
    }

    [UnmanagedCallersOnly]
    private static void OnLine(void* ctx, int level, byte* component, byte* msg)
    {
        try
        {
            ILogger? l = t_current ?? s_last;
            string c = Native.Utf8(component), m = Native.Utf8(msg);
            if (l is null)
            {
                Console.Error.WriteLine($"libingest {c}: {m}");
                return;
            }
            s_write[Math.Clamp(level, 0, 3)](l, c, m, null);
        }
        catch (Exception)
        {
            // a logger that throws must not take the native caller down with it
        }
    }
}
