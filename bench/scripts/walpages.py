#!/usr/bin/env python3
"""walpages.py DB WAL: which B-trees each commit in a SQLite WAL wrote.

Reads the frames of WAL (those of its current generation: salts equal to
the header's), splits them into commits (a frame with a database size is a
commit's last), and names each frame's page by its B-tree (table or index)
through SQLite's dbstat over a copy of DB with WAL applied. Prints the
frames per commit, in all and by B-tree. Copy DB and WAL while the
database is open (closing it checkpoints the WAL away); BenchmarkTimelineSQLite
does so when HEPH_TIMELINE_WAL names a directory.
"""
import collections
import os
import shutil
import sqlite3
import struct
import sys
import tempfile


def frames(wal):
    with open(wal, "rb") as f:
        data = f.read()
    magic, _, page_size, _, salt1, salt2, _, _ = struct.unpack(">8I", data[:32])
    if magic not in (0x377F0682, 0x377F0683):
        sys.exit(f"{wal}: not a WAL file")
    commits, cur, off = [], [], 32
    while off + 24 + page_size <= len(data):
        pgno, size, s1, s2 = struct.unpack(">4I", data[off:off + 16])
        if (s1, s2) != (salt1, salt2):
            break
        cur.append(pgno)
        if size:
            commits.append(cur)
            cur = []
        off += 24 + page_size
    return commits


def names(db, wal):
    d = tempfile.mkdtemp()
    try:
        shutil.copy(db, os.path.join(d, "x.db"))
        shutil.copy(wal, os.path.join(d, "x.db-wal"))
        con = sqlite3.connect(os.path.join(d, "x.db"))
        try:
            return dict(con.execute("SELECT pageno, name FROM dbstat"))
        except sqlite3.OperationalError as e:
            sys.exit(f"dbstat: {e} (SQLite without SQLITE_ENABLE_DBSTAT_VTAB)")
        finally:
            con.close()
    finally:
        shutil.rmtree(d)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    commits = frames(sys.argv[2])
    if not commits:
        sys.exit("no commits in the WAL's current generation")
    by = names(sys.argv[1], sys.argv[2])
    count = collections.Counter()
    for c in commits:
        for p in c:
            count[by.get(p, "(freelist or new)")] += 1
    n = len(commits)
    print(f"{n} commits, {sum(map(len, commits)) / n:.2f} frames (pages) per commit")
    for name, k in count.most_common():
        print(f"  {k / n:6.2f}  {name}")


main()
