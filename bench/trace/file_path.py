#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""file_path.py TRACE SRCROOT [--keep=PREFIXES] [--control-only] [--from=FUNC] [--headers-inline]
[--issue] [--show]: the path of one fallback frame
through the source files, from bench/trace/file_trace.c's record of an ingestd built with
-finstrument-functions, and how many times it returns to a file it left.

Window: from the entry of on_data_chunk (the gRPC server's DATA callback) that delivers
the first PushFrames message (the first stream_msg_begin: the frame's first chunk) to the return of the first conn_write (the socket write) after the
last ing_grpc_call_send (its last Ack: DURABLE), all threads in the one order they were
recorded. At every event execution is in a file: the entered function's, or at an exit
the caller's (each thread's own stack). Events in files outside --keep (default: control/
and dataplane/; common/, proto/'s generated code, numa/ are then "transparent": execution
stays in the file that called them) are skipped. Consecutive events in the same file are
one visit; a return is a visit to a file visited before in the window. --control-only:
the control thread's events alone (the one that ran on_data_chunk), without the
persistence worker's. --from=FUNC: the window starts at the first entry of FUNC (on the
thread that delivered the message) instead. --headers-inline: a function whose source is a
header (a static inline) runs in the file that included it, as a common/ function does:
it does not make a visit of its own. --issue: the count of issue #28 (bench/trace/README.md):
--control-only --from=msg_finish --headers-inline.
"""
import collections
import os
import subprocess
import sys


def resolve(addrs, srcroot):
    """{id: (function, file relative to srcroot or None)} through addr2line."""
    by_obj = collections.defaultdict(list)
    for i, (obj, off) in addrs.items():
        by_obj[obj].append((i, off))
    out = {}
    for obj, lst in by_obj.items():
        if obj == '?' or not os.path.exists(obj):
            for i, _ in lst:
                out[i] = ('?', None)
            continue
        r = subprocess.run(['addr2line', '-f', '-e', obj] + ['%x' % off for _, off in lst],
                           capture_output=True, text=True, check=True).stdout.split('\n')
        for k, (i, _) in enumerate(lst):
            fn, loc = r[2 * k], r[2 * k + 1]
            path = loc.rsplit(':', 1)[0]
            rel = None
            if path.startswith(srcroot + '/'):
                rel = path[len(srcroot) + 1:]
            elif '/' in path and not path.startswith('/usr'):
                rel = 'build:' + os.path.basename(path)   # generated (protobuf-c)
            out[i] = (fn, rel)
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    opts = {a.split('=', 1)[0]: (a.split('=', 1) + [''])[1] for a in sys.argv[1:] if a.startswith('--')}
    if len(args) != 2:
        print(__doc__.split('\n\n')[0], file=sys.stderr)
        sys.exit(2)
    trace, srcroot = args[0], os.path.realpath(args[1])
    if '--issue' in opts:
        opts.setdefault('--control-only', '')
        opts.setdefault('--from', 'msg_finish')
        opts.setdefault('--headers-inline', '')
    keep = tuple((opts.get('--keep') or 'control/,dataplane/').split(','))
    from_fn = opts.get('--from')
    addrs, events = {}, []
    for line in open(trace):
        p = line.split()
        if p[0] == 'A':
            addrs[int(p[1], 16)] = (p[2], int(p[3], 16))
        elif p[0] == 'E':
            events.append((int(p[1]), p[2] == '+', int(p[3], 16)))
    info = resolve(addrs, srcroot)
    if '--headers-inline' in opts:
        info = {i: (fn, None if f and f.endswith('.h') else f) for i, (fn, f) in info.items()}
    # each thread's stack of files, replayed over the whole trace
    stacks = collections.defaultdict(list)
    start = end = None
    last_send = None
    last_chunk = None
    for k, (tid, enter, i) in enumerate(events):
        fn = info[i][0]
        if enter and fn == 'on_data_chunk':
            last_chunk = k
        if enter and fn == 'stream_msg_begin' and start is None and not from_fn:
            start = last_chunk
        if enter and from_fn and fn == from_fn and start is None:
            start = k
        if enter and fn == 'ing_grpc_call_send' and start is not None:
            last_send = k
    if start is None or last_send is None:
        sys.exit('file_path: no PushFrames message or no ack after it in the trace')
    for k in range(last_send, len(events)):
        tid, enter, i = events[k]
        if not enter and info[i][0] == 'conn_write':
            end = k
            break
    if end is None:
        sys.exit('file_path: no conn_write after the last ack')
    visits = []   # [file, thread, [functions]]
    control = events[start][0]
    for k, (tid, enter, i) in enumerate(events[:end + 1]):
        if '--control-only' in opts and tid != control:
            continue
        st = stacks[tid]
        if enter:
            st.append(info[i][1])
        elif st:
            st.pop()
        if k < start:
            continue
        # where execution is now: the innermost kept file on this thread's stack
        where = None
        for f in reversed(st if not enter else st):
            if f and f.startswith(keep):
                where = f
                break
        if where is None:
            continue
        if not visits or visits[-1][0] != where:
            visits.append([where, tid, []])
        if enter and info[i][1] and info[i][1].startswith(keep):
            visits[-1][2].append(info[i][0])
    seen, returns = set(), 0
    per_file = collections.Counter()
    for f, _, _ in visits:
        per_file[f] += 1
        if f in seen:
            returns += 1
        seen.add(f)
    threads = len({t for _, t, _ in visits})
    print('window: events %d..%d of %d; files kept: %s' % (start, end, len(events), ','.join(keep)))
    print('visits %d, files %d, returns to a file left %d, threads %d' %
          (len(visits), len(seen), returns, threads))
    print('entered most: ' + ', '.join('%s %d' % kv for kv in per_file.most_common(6)))
    if '--show' in opts:
        for f, t, fns in visits:
            print('  %-40s t%-7d %s' % (f, t, ' '.join(fns[:6]) + (' ...' if len(fns) > 6 else '')))


if __name__ == '__main__':
    main()
