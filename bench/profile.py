"""One workload alone (A-send, A-share, B or D), syncpeer only, optionally each daemon under `perf record -g`
(or `strace -c -f`), then where each daemon's CPU went: by top function of each thread, by system
call, and by kind of leaf (SQLite, malloc, retain/release, hashing and crypto, copies, TCP, page
cache). For profiling a change, not for figures to compare with other tools (`make bench` is for
those).

    python3 -m bench.profile b --syncpeer .build/release/syncpeer [--perf DIR] [--runs N]
    python3 -m bench.profile d --syncpeer old/syncpeer --syncpeer new/syncpeer --runs 4
    python3 -m bench.profile a --a-size 64MiB --syncpeer old/syncpeer --syncpeer new/syncpeer --runs 6 --sends 10 [--strace DIR]
    python3 -m bench.profile share --syncpeer .build/release/syncpeer   (A-share: a new file moved into a shared folder)

Each run prints `RESULT binary workload seconds cpu peak_rss load`. Runs take the binaries
given in turn, in one temporary directory where nothing is deleted until the end (ext4 makes
creates pay for recently freed inodes: a run after a deletion of 50,000 files spent 0.7 CPU-s
more in `recently_deleted`). On a machine shared with other work compare CPU-s, not seconds."""
import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import folders, send
from .files import home_tree_plan, tree_digest, write_random_file, write_tree
from .growth import parse_size
from .peers import Run, SyncpeerGroup
from .procs import kill_started, log

SKIP = re.compile(r"^(start_thread|_dispatch|thunk for|partial apply|\[unknown\]|clone3?|__clone|swift::|"
                  r"reabstraction|closure #\d+ in closure|\?|0+$)")
LEAVES = (("SQLite", r"sqlite3"),
          ("malloc/free", r"malloc|_int_free|^free$|cfree|unlink_chunk|sysmalloc|malloc_consolidate|madvise|trim"),
          ("retain/release", r"swift_retain|swift_release|RefCounts|swift_bridgeObject|_swift_release_dealloc"),
          ("hashing/crypto", r"compress4|blake3|chacha|aes|gcm|poly1305"),
          ("chunker", r"gear|FastCDC|Chunker"),
          ("copies", r"memcpy|memmove|copy_user|copyin|copyout|copy_page|rep_movs|clear_page|memset"),
          ("TCP/socket", r"^tcp_|^__tcp|skb|sock_|^ip_|^__ip|^net_|loopback|^__dev_queue|^__netif"),
          ("page cache/fs", r"filemap|folio|^ext4_|^jbd2|page_cache|^xas_|lru|^__mod_lruvec|mpage|^iomap"))


def folded(data):
    """perf.data → Counter of stacks (root first, Swift names demangled)."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,ip,sym"], capture_output=True, text=True).stdout
    stacks, frames = collections.Counter(), []
    for line in out.splitlines() + [""]:
        if line[:1] in (" ", "\t") and line.strip():
            parts = line.strip().split(None, 1)
            frames.append(parts[1] if len(parts) > 1 else "?")
            continue
        if frames:
            stacks[";".join(reversed(frames))] += 1
        frames = []
    keys = list(stacks)
    demangled = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(keys),
                               capture_output=True, text=True).stdout.splitlines()
    if len(demangled) != len(keys):
        return stacks
    return collections.Counter({d: stacks[k] for k, d in zip(keys, demangled)})


def summary(name, stacks, top=18):
    total = sum(stacks.values()) or 1
    by_top, by_call, by_leaf = collections.Counter(), collections.Counter(), collections.Counter()
    for stack, n in stacks.items():
        frames = stack.split(";")
        ours = [f for f in frames if not SKIP.search(f)]
        by_top[ours[0][:90] if ours else "?"] += n
        call = next((f for f in frames if f.startswith(("__x64_sys_", "__do_sys_"))), None)
        if call:
            by_call[call.replace("__x64_sys_", "").replace("__do_sys_", "")] += n
        for kind, pattern in LEAVES:
            if re.search(pattern, frames[-1], re.I):
                by_leaf[kind] += n
                break
    print(f"== {name}: {total} samples")
    for title, counter in (("by thread's top function", by_top), ("in system calls", by_call), ("leaf kind", by_leaf)):
        print(f"  {title}:")
        for key, n in counter.most_common(top):
            print(f"    {100 * n / total:5.1f}%  {key}")


def send_repeated(group, source, sends, key):
    """`send.send_measured` `sends` times on one pair: its figures, CPU-s and seconds per send."""
    results = [send.send_measured(group, source, key=f"{key}.{n}") for n in range(sends)]
    result = results[-1]
    if sends > 1:
        result["seconds"] = round(sum(r["seconds"] for r in results) / sends, 3)
        result["cpu"] = {name: {kind: round(sum(r["cpu"][name][kind] for r in results) / sends, 4) for kind in ("user_s", "system_s")}
                         for name in result["cpu"]}
    return result


def main():
    p = argparse.ArgumentParser(prog="python3 -m bench.profile", description=__doc__.split("\n\n")[0])
    p.add_argument("workload", choices=("a", "share", "b", "d"))
    p.add_argument("--syncpeer", action="append", required=True, help="a release-built binary; several: runs take them in turn")
    p.add_argument("--perf", default="", help="a directory: each daemon runs under perf record -g, summarized")
    p.add_argument("--strace", default="", help="a directory: each daemon runs under strace -c -f (system calls counted)")
    p.add_argument("--sends", type=int, default=1,
                   help="A-send: the file sent this many times per pair, figures per send (/proc counts CPU in 10 ms ticks)")
    p.add_argument("--frequency", type=int, default=499, help="perf's samples per second")
    p.add_argument("--a-size", default="1GiB", help="A-send and A-share: the file's size (e.g. 64MiB, 1GiB)")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--b-files", type=int, default=10_000)
    p.add_argument("--d-files", type=int, default=50_000)
    p.add_argument("--d-bytes", type=int, default=2 << 30)
    p.add_argument("--d-dirs", type=int, default=5_000)
    p.add_argument("--window", type=int, default=0)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="syncpeer-profile-")
    binaries = args.syncpeer
    args.syncpeer = binaries[0]
    run = Run(args, work)
    try:
        if args.workload == "a":
            source = run.path("a-send.bin")
            write_random_file(source, parse_size(args.a_size))
        if args.workload == "d":
            plan = home_tree_plan(args.d_files, args.d_bytes, args.d_dirs)
            tree = run.path("home-tree")
            write_tree(tree, plan)
            digest = tree_digest(tree, [path for path, _ in plan[1]])
        for i in range(args.runs):
            run.syncpeer = binaries[i % len(binaries)]
            group = SyncpeerGroup(run, f"p{i}", 2)
            if args.workload != "a":
                empty = run.path(f"share{i}")
                os.makedirs(empty)
                group.share(empty)
            recorders = {}
            if args.strace:
                os.makedirs(args.strace, exist_ok=True)
                for name, pid in group.pids().items():
                    recorders[name] = subprocess.Popen(
                        ["strace", "-c", "-f", "-o", os.path.join(args.strace, f"{args.workload}{i}-{name}.txt"), "-p", str(pid)],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1)
            elif args.perf:
                os.makedirs(args.perf, exist_ok=True)
                for name, pid in group.pids().items():
                    recorders[name] = subprocess.Popen(
                        ["perf", "record", "-g", "-F", str(args.frequency), "-o", os.path.join(args.perf, f"{args.workload}{i}-{name}.data"),
                         "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1)
            if args.workload == "a":
                result = send_repeated(group, source, args.sends, key=f"a{i}")
            elif args.workload == "share":
                result = folders.a_share(group, parse_size(args.a_size))
            elif args.workload == "b":
                result = folders.b_small(group, args.b_files)
            else:
                result = folders.d_tree(group, plan, tree, digest)
            for recorder in recorders.values():
                recorder.send_signal(signal.SIGINT)
                recorder.wait()
            print("RESULT", run.syncpeer, args.workload, result.get("seconds"), result.get("cpu"), result.get("peak_rss"),
                  result.get("load_average"), flush=True)
            group.close()
            if args.workload == "d":
                os.rename(os.path.join(group.source_dir, os.path.basename(tree)), tree)
            for name in recorders:
                if args.strace:
                    with open(os.path.join(args.strace, f"{args.workload}{i}-{name}.txt")) as f:
                        print(f"== {args.workload} run {i}, {name}: system calls\n{f.read()}")
                else:
                    summary(f"{args.workload} run {i}, {name}", folded(os.path.join(args.perf, f"{args.workload}{i}-{name}.data")))
    finally:
        kill_started()
        shutil.rmtree(work, ignore_errors=True)
        log("done")


if __name__ == "__main__":
    sys.exit(main())
