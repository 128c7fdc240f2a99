#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""xport_calls.py HEADER... FILE... - how chatty a transport contract is, counted mechanically.

HEADER is the contract between the service core and its transports (control/service/
transport.h today, control/xport.h at 657a970). Its functions are the identifiers declared
at brace depth 0 as `name(` (prototypes; not function-pointer members, macros or the
structs' fields). For each transport FILE: which of those functions it uses, as "distinct
of total": calls (an identifier followed by `(`) and functions taken as pointers (a method
table's `.on_close = svc_on_close`), comments, string literals and preprocessor lines
removed; a definition in FILE does not count. Also the calls alone and their call sites.
Not a test: it prints.

  python3 bench/xport_calls.py control/service/transport.h control/service/xport/*.c
With more headers (the core headers a transport also includes: admission, protobuf
helpers), their functions are counted too, per header.
"""
import re
import sys

IDENT_CALL = re.compile(r'\b([A-Za-z_]\w*)\s*\(')


def strip(src):
    """C source without comments, string and char literals (kept as spaces)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(' ' * (j - i)); i = j
        elif src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i)); i = j
        elif c in '"\'':
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == '\\' else 1
            out.append(' ' * (j + 1 - i)); i = j + 1
        else:
            out.append(c); i += 1
    return ''.join(out)


def no_preproc(src):
    """Drop preprocessor lines (with their continuations)."""
    lines, out, cont = src.split('\n'), [], False
    for l in lines:
        if cont or l.lstrip().startswith('#'):
            cont = l.rstrip().endswith('\\')
            out.append('')
        else:
            out.append(l)
    return '\n'.join(out)


def contract(header):
    src = no_preproc(strip(open(header).read()))
    depth, top = 0, []
    for c in src:
        if c == '{':
            depth += 1
        elif c == '}':
            depth -= 1
        elif depth == 0:
            top.append(c)
    top = ''.join(top)
    names = []
    # a prototype: its name follows a type, not `(*`, and is not an attribute/keyword
    skip = {'__attribute__', 'format', 'printf', 'sizeof', 'if', 'while', 'for', 'return',
            'switch', 'typeof', 'void', 'int', 'char', 'unsigned', 'const', 'struct'}
    for stmt in top.split(';'):
        m = re.search(r'([A-Za-z_]\w*)\s*\(', stmt)
        if not m or m.group(1) in skip:
            continue
        before = stmt[:m.start()]
        if re.search(r'\(\s*\*\s*$', before):
            continue
        if not re.search(r'[\w\*]\s*$', before):
            continue   # no return type before it: not a prototype
        if m.group(1) not in names:
            names.append(m.group(1))
    return names


def calls(path, names):
    src = no_preproc(strip(open(path).read()))
    want, sites, defined = set(names), {}, set()
    for m in IDENT_CALL.finditer(src):
        name = m.group(1)
        if name not in want:
            continue
        # a definition: `name(...) {` at the start of a line's declaration
        rest = src[m.end():]
        depth, k = 1, 0
        while k < len(rest) and depth:
            depth += {'(': 1, ')': -1}.get(rest[k], 0)
            k += 1
        after = rest[k:].lstrip()
        line_start = src.rfind('\n', 0, m.start()) + 1
        if after.startswith('{') and not src[line_start:m.start()].startswith(('\t', ' ')):
            defined.add(name)
            continue
        sites[name] = sites.get(name, 0) + 1
    # taken as a pointer (a method table's on_close = svc_on_close): a use, not a call
    refs = set()
    for m in re.finditer(r'\b([A-Za-z_]\w*)\b(?!\s*\()', src):
        if m.group(1) in want and m.group(1) not in defined:
            refs.add(m.group(1))
    return sites, refs


def main():
    hdrs = [a for a in sys.argv[1:] if a.endswith('.h')]
    files = [a for a in sys.argv[1:] if not a.endswith('.h')]
    if not hdrs or not files:
        print('usage: xport_calls.py HEADER... FILE...', file=sys.stderr)
        sys.exit(2)
    names, owner = [], {}
    for h in hdrs:
        for n in contract(h):
            if n not in owner:
                owner[n] = h
                names.append(n)
        print('%s: %d functions' % (h, sum(1 for n in owner if owner[n] == h)))
    for path in files:
        s, refs = calls(path, names)
        used = set(s) | refs
        per = ', '.join('%s %d' % (h.rsplit('/', 1)[-1], sum(1 for n in used if owner[n] == h))
                        for h in hdrs)
        print('  %-34s uses %2d of %d (%s; calls %d, %d call sites; + taken as pointers: %s)' %
              (path, len(used), len(names), per, len(s), sum(s.values()),
               ' '.join(sorted(refs - set(s))) or 'none'))
        print('      %s' % ' '.join(sorted(used)))


if __name__ == '__main__':
    main()
