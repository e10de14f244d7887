#!/usr/bin/env python3
"""Drop checkpatch findings on moved lines.

    checkpatch-filter.py PATCH < checkpatch-output

A move keeps names and bodies as they were, so that "git show
--color-moved" proves it; checkpatch then reports the moved code's old
style.  A finding is dropped when every added line it quotes is also a
removed line of the same patch (same text without leading and trailing
blanks).  Prints the remaining findings and a last line
"total: E errors, W warnings, C checks, M on moved lines".
"""
import re
import sys


def removed_lines(path):
    removed = set()
    with open(path, errors='replace') as f:
        for line in f:
            if line.startswith('-') and not line.startswith('---'):
                removed.add(line[1:].strip())
    return removed


def main():
    removed = removed_lines(sys.argv[1])
    blocks, cur = [], []
    for line in sys.stdin.read().splitlines():
        if re.match(r'^(ERROR|WARNING|CHECK):', line):
            if cur:
                blocks.append(cur)
            cur = [line]
        elif line.startswith('total:') or line.startswith('NOTE:'):
            if cur:
                blocks.append(cur)
            cur = []
        elif cur:
            cur.append(line)
    if cur:
        blocks.append(cur)

    counts = {'ERROR': 0, 'WARNING': 0, 'CHECK': 0}
    moved = 0
    for b in blocks:
        added = [l[1:].strip() for l in b[1:] if l.startswith('+')]
        if added and all(a in removed for a in added):
            moved += 1
            continue
        counts[b[0].split(':')[0]] += 1
        print('\n'.join(b).rstrip())
        print()
    print('total: %d errors, %d warnings, %d checks, %d on moved lines' %
          (counts['ERROR'], counts['WARNING'], counts['CHECK'], moved))


main()
