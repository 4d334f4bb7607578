#!/usr/bin/python3
"""Writes the zip64 zips of Zip64Tests into DIR (argv[1]). Python's zipfile writes zip64 only
past 65,535 entries or 2 GiB, so these few-entry ones are built here field by field (APPNOTE
4.3.14-4.3.16, 4.5.3): every entry's sizes and offset in a zip64 field, the zip64 end record
and its locator. The good one is checked with zipfile itself; the hostile ones change one
field each so that it lies (a count, a size, an offset, a missing or short field)."""
import os, struct, sys, zipfile, zlib

out = sys.argv[1]
FILES = [("a.txt", b"alpha\n" * 10), ("sub/b.bin", bytes(range(256)) * 4), ("sub/c.txt", b"")]
MAX32 = 0xFFFFFFFF


def build(name, files=FILES, lie=None):
    """A stored zip64 zip; `lie` names one field to make lie."""
    body, central = bytearray(), bytearray()
    for index, (entry, data) in enumerate(files):
        crc = zlib.crc32(data)
        offset = len(body)
        raw = entry.encode()
        local_extra = struct.pack("<HHQQ", 1, 16, len(data), len(data))
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0x0800, 0, 0, 0x21, crc, MAX32, MAX32, len(raw), len(local_extra))
        body += raw + local_extra + data
        size, csize, where = len(data), len(data), offset
        if index == 0 and lie == "entry-size":
            size = 1 << 62
        if index == 0 and lie == "entry-compressed":
            csize = 1 << 40
        if index == 1 and lie == "entry-offset":
            where = 1 << 40
        if index == 1 and lie == "entry-offset-sign":
            where = 1 << 63
        extra = struct.pack("<HHQQQ", 1, 24, size, csize, where)
        if index == 0 and lie == "no-zip64-field":
            extra = struct.pack("<HH4s", 0x5455, 4, b"time")
        if index == 0 and lie == "short-zip64-field":
            extra = struct.pack("<HHQ", 1, 8, size)
        if index == 0 and lie == "overrun-extra":
            extra = struct.pack("<HHQQQ", 1, 200, size, csize, where)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x032D, 45, 0x0800, 0, 0, 0x21, crc, MAX32, MAX32,
                               len(raw), len(extra), 0, 0, 0, 0o100644 << 16, MAX32)
        central += raw + extra
    count = len(files)
    cd_offset, cd_size = len(body), len(central)
    record_offset = cd_offset + cd_size
    count64 = {"count-huge": 1 << 40, "count-more": count + 2}.get(lie, count)
    cd_offset64 = {"directory-past-end": cd_offset + 10_000, "directory-overlaps-record": cd_offset + 40}.get(lie, cd_offset)
    record = struct.pack("<IQHHIIQQQQ", 0x06064B50 if lie != "record-signature" else 0x12345678, 44, 0x032D, 45, 0, 0,
                         count64, count64, cd_size, cd_offset64)
    locator_target = {"locator-past-end": 1 << 40, "locator-into-entries": 0}.get(lie, record_offset)
    locator = struct.pack("<IIQI", 0x07064B50, 0, locator_target, 1)
    classic_count = count if lie == "records-disagree" else 0xFFFF
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, classic_count + (1 if lie == "records-disagree" else 0),
                      classic_count + (1 if lie == "records-disagree" else 0), MAX32, MAX32, 0)
    if lie == "no-zip64-end":
        record, locator = b"", b""
    path = os.path.join(out, name)
    with open(path, "wb") as f:
        f.write(bytes(body) + bytes(central) + record + locator + end)
    return path


good = build("zip64-good.zip")
with zipfile.ZipFile(good) as z:
    assert z.testzip() is None
    assert [(i.filename, i.file_size) for i in z.infolist()] == [(n, len(d)) for n, d in FILES]
    assert z.read("sub/b.bin") == FILES[1][1]

for lie in ["count-huge", "count-more", "directory-past-end", "directory-overlaps-record", "record-signature",
            "locator-past-end", "locator-into-entries", "records-disagree", "no-zip64-end", "entry-size",
            "entry-compressed", "entry-offset", "entry-offset-sign", "no-zip64-field", "short-zip64-field", "overrun-extra"]:
    build("zip64-%s.zip" % lie, lie=lie)
