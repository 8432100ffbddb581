#!/usr/bin/env python3
"""Where a broker's write-ahead log goes: reads DB-wal frame by frame (the
valid ones: salts of the header, up to the last commit) and names each
frame's page by the B-tree that owns it in DB (SQLite's dbstat table), then
prints frames per commit and per table or index.

Use on a copy of a killed broker's files (the log still holds every frame):
    cp DB DB-wal /tmp/x/ && fanout/tools/wal-profile.py /tmp/x/DB
The copy is opened read-only with the log left out (immutable=1), so that
reading it does not checkpoint or recover the log being profiled.
"""
import collections
import sqlite3
import struct
import sys


def frames(wal_path):
    with open(wal_path, "rb") as f:
        hdr = f.read(32)
        magic, _ver, page, _seq, s1, s2 = struct.unpack(">IIIIII", hdr[:24])
        assert magic in (0x377F0682, 0x377F0683), "not a WAL file"
        group = []
        while True:
            fh = f.read(24)
            if len(fh) < 24:
                return page
            pgno, commit, fs1, fs2 = struct.unpack(">IIII", fh[:16])
            if (fs1, fs2) != (s1, s2):
                return page
            f.seek(page, 1)
            group.append(pgno)
            if commit:
                yield group
                group = []


def main(db):
    gen = frames(db + "-wal")
    commits = list(gen)
    c = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    owner = dict((p, n) for n, p in c.execute("SELECT name, pageno FROM dbstat"))
    page = c.execute("PRAGMA page_size").fetchone()[0]
    per_tree = collections.Counter()
    total = 0
    for g in commits:
        total += len(g)
        for p in g:
            per_tree[owner.get(p, "page 1" if p == 1 else "(free or new)")] += 1
    n = max(len(commits), 1)
    print(f"page size {page}; {len(commits)} commits, {total} frames "
          f"({total * (page + 24) / 2**20:.1f} MB), {total / n:.1f} frames per commit")
    dup = sum(len(g) - len(set(g)) for g in commits)
    print(f"frames repeating a page within a commit: {dup}")
    for name, k in per_tree.most_common():
        print(f"{k:>10} {100 * k / max(total, 1):5.1f} %  {k / n:6.2f}/commit  {name}")


if __name__ == "__main__":
    main(sys.argv[1])
