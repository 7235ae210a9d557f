#!/usr/bin/env python3
"""Writes the WebDataset shard that pipeline/formats' tests read, with
Python's tarfile (an independent tar writer), deterministically:

    python3 scripts/webdataset-testdata.py pipeline/formats/testdata/webdataset/shard-000000.tar

With --samples N it writes N plain samples (NNNNNN.txt, NNNNNN.cls) instead:
the tests use that to check larger shards written at test time.
"""
import io
import sys
import tarfile


def add(tf, name, data=None, kind=tarfile.REGTYPE):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mtime = 1700000000
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    if data is None:
        tf.addfile(info)
        return
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def fixed(tf):
    add(tf, "000000.jpg", b"\xff\xd8\xff\xe0 not really a jpeg 0")
    add(tf, "000000.cls", b"3")
    add(tf, "000000.json", b'{"caption": "a cat"}')
    add(tf, "000001.cls", b"7")
    add(tf, "000001.jpg", b"\xff\xd8\xff\xe0 not really a jpeg 1")
    add(tf, "000001.json", b'{"caption": "a dog"}')
    add(tf, "sub", kind=tarfile.DIRTYPE)  # skipped: not a file
    add(tf, "sub/000002.seg.png", b"\x89PNG segmentation")
    add(tf, "sub/000002.cls", b"1")
    add(tf, "README", b"no extension: skipped")
    add(tf, "000003.cls", b"")  # empty member
    add(tf, "000003.txt", "ünïcödé text, 中文".encode())
    # Longer than ustar's 100-byte name field: a PAX header carries it.
    add(tf, "long/" + "x" * 120 + ".txt", b"long name")
    add(tf, "ünï/0004.txt", b"unicode key")


def main():
    args = sys.argv[1:]
    n = None
    if args and args[0] == "--samples":
        n, args = int(args[1]), args[2:]
    with tarfile.open(args[0], "w", format=tarfile.PAX_FORMAT) as tf:
        if n is None:
            fixed(tf)
        else:
            for i in range(n):
                add(tf, "%06d.txt" % i, ("sample %d " % i * (i % 7)).encode())
                add(tf, "%06d.cls" % i, b"%d" % (i % 10))


main()
