#!/usr/bin/python3
"""Writes the zips of SafeUnzipperTests into DIR (argv[1]) with Python's zipfile, the module
Magic Wormhole itself zips folders with: good ones (deflated at levels 0, 1 and 9, stored,
nested, with modes) and hostile ones (names out of the folder, a link, duplicates, a size
that lies, a CRC that lies)."""
import os, random, struct, sys, zipfile, zlib

out = sys.argv[1]
rng = random.Random(7)
noise = bytes(rng.getrandbits(8) for _ in range(300_000))
text = (b"the quick brown fox jumps over the lazy dog " * 20_000)

def make(name, entries, method=zipfile.ZIP_DEFLATED, level=None):
    path = os.path.join(out, name)
    with zipfile.ZipFile(path, "w", method, compresslevel=level) as z:
        for entry in entries:
            if isinstance(entry, zipfile.ZipInfo):
                z.writestr(entry, b"target" if entry.external_attr >> 16 & 0o170000 == 0o120000 else b"")
            else:
                info = zipfile.ZipInfo(entry[0])
                info.compress_type = method
                info.external_attr = entry[2] << 16 if len(entry) > 2 else 0o100644 << 16
                info.create_system = 3
                z.writestr(info, entry[1], compresslevel=level)
    return path

good = [("top.txt", b"hello\n", 0o100755), ("sub/noise.bin", noise), ("sub/deeper/text.txt", text), ("sub/empty", b""), ("emptydir/", b"", 0o40755)]
for level in (0, 1, 9):
    make("good-deflated-%d.zip" % level, good, level=level)
make("good-stored.zip", good, method=zipfile.ZIP_STORED)

make("dotdot.zip", [("ok.txt", b"fine"), ("../evil.txt", b"x")])
make("absolute.zip", [("/tmp/evil.txt", b"x")])
make("inner-dotdot.zip", [("a/../../evil.txt", b"x")])
link = zipfile.ZipInfo("link")
link.create_system = 3
link.external_attr = 0o120777 << 16
make("symlink.zip", [("ok.txt", b"fine"), link])
import warnings
warnings.simplefilter("ignore")
make("duplicate.zip", [("same.txt", b"one"), ("same.txt", b"two")])
make("file-and-folder.zip", [("a", b"file"), ("a/b", b"inside")])

# A bomb: 8 MiB of zeros that declares 1000 bytes (central directory and local header).
bomb = make("bomb.zip", [("zeros.bin", b"\0" * (8 << 20))])
data = bytearray(open(bomb, "rb").read())
cd = data.rfind(b"PK\x01\x02")
struct.pack_into("<I", data, cd + 24, 1000)
struct.pack_into("<I", data, 22, 1000)
open(bomb, "wb").write(data)

# A CRC that lies.
crc = make("badcrc.zip", [("a.txt", b"abc" * 1000)])
data = bytearray(open(crc, "rb").read())
cd = data.rfind(b"PK\x01\x02")
struct.pack_into("<I", data, cd + 16, 12345)
open(crc, "wb").write(data)

open(os.path.join(out, "expected-text.bin"), "wb").write(text)
open(os.path.join(out, "expected-noise.bin"), "wb").write(noise)
