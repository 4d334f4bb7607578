"""How cost grows: A-send at several sizes and B at several counts (syncpeer), in seconds and
CPU-s per GiB or per 1,000 files. Sizes already measured by the run's A-send and B rows are
taken from them."""
import os

from . import folders, send
from .files import write_random_file
from .files import set_aside
from .peers import SyncpeerGroup
from .procs import GiB, MiB, cpu_total, log


def parse_size(text):
    text = text.strip()
    for suffix, factor in (("GiB", GiB), ("MiB", MiB)):
        if text.endswith(suffix):
            return int(float(text[:-len(suffix)]) * factor)
    return int(text)


def measure(run, args, results, sampler):
    out = {"a": [], "b": []}
    known_a = (results.get("syncpeer") or {}).get("a_send") or {}
    for size in (parse_size(x) for x in args.growth_a.split(",") if x):
        if known_a.get("bytes") == size:
            entry = dict(known_a)
        else:
            path = run.path(f"growth-{size}.bin")
            write_random_file(path, size)
            entry = send.a_send(run, path, sampler, key=f"growth_a_{size // MiB}m")
            os.unlink(path)
        entry["cpu_total_s"] = cpu_total(entry.get("cpu"))
        out["a"].append(entry)
    known_b = (results.get("syncpeer") or {}).get("b") or {}
    for count in (int(x) for x in args.growth_b.split(",") if x):
        if known_b.get("files") == count and "seconds" in known_b:
            entry = dict(known_b)
        else:
            log(f"growth: B with {count:,} files")
            group = SyncpeerGroup(run, f"growth-b{count}", 2, sampler)
            try:
                empty = run.path(f"growth-b{count}-share")
                os.makedirs(empty)
                group.share(empty, args.timeout)
                entry = folders.b_small(group, count)
            finally:
                group.close()
                set_aside(run.work, empty)
        out["b"].append(entry)
    return out
