"""Folder workloads, run the same way for every tool (a group of nodes from peers.py): the
change is made in alice's folder, the tool is told to scan it (`syncpeer rescan DIR [PATH]`,
Syncthing's `POST /rest/db/scan?folder=&sub=`) or, for the rows "from the write", its watcher
sees it; the clock runs until the check that found every receiver's copy right started
(polled every 0.1 s). CPU-s and peak RSS of every node, bytes on the wire from the kernel's
socket counters."""
import os
import time

from .files import (TreeArrival, big_file_arrived, change_arrived, make_tiny_files, overwrite_in_place,
                    quiet_disk, small_files_arrived, warm, write_random_file, write_small_files)
from .peers import reset_peak
from .procs import MiB, BenchError, cpu_delta, cpu_total, load_average, log, proc_cpu, proc_status, \
    wait_for_arrival


def measure(group, what, change, arrived, sub=None, trigger=True, timeout=600, interval=0.1, wait_settled=True):
    """Runs one change on `group` and returns its figures (see the module's note)."""
    quiet_disk()
    pids = group.pids()
    for pid in pids.values():
        reset_peak(pid)
    load = load_average()
    cpu0 = {n: proc_cpu(p) for n, p in pids.items()}
    wire0 = {n: d.wire() for n, d in group.nodes.items()}
    start = time.monotonic()
    change()
    if trigger:
        group.trigger(sub)
    try:
        elapsed = wait_for_arrival(f"{group.tool}: {what}", timeout, arrived, interval) - start
    except BenchError as error:
        return {"error": str(error), "load_average": load}
    cpu1 = {n: proc_cpu(p) for n, p in pids.items()}
    memory = {n: proc_status(p) for n, p in pids.items()}
    if wait_settled:
        group.settle(120)
        time.sleep(0.5)
    wire1 = {n: d.wire() for n, d in group.nodes.items()}
    cpu = cpu_delta(cpu0, cpu1)
    wire, sent = None, None
    if all(wire0.get(n) is not None and wire1.get(n) is not None for n in wire0):
        sent = {n: wire1[n] - wire0[n] for n in wire0}
        wire = sum(sent.values())
    result = {"seconds": round(elapsed, 2), "cpu": cpu, "cpu_total_s": cpu_total(cpu),
              "peak_rss": {n: m.get("VmHWM") for n, m in memory.items()}, "wire_bytes": wire, "sent_bytes": sent,
              "trigger": "explicit scan" if trigger else "watcher", "load_average": load}
    per_node = ", ".join(f"{n} {c['user_s'] + c['system_s']:.2f}" for n, c in cpu.items())
    wire_text = f"{wire / MiB:.2f} MiB" if wire is not None else "?"
    log(f"  {group.tool} {what}: {elapsed:.2f} s, CPU-s {result['cpu_total_s']} ({per_node}), wire {wire_text}, "
        f"load {load[0]}")
    return result


def a_share(group, size):
    """A-share: a new file of `size` random bytes moved into the shared folder."""
    staging = group.run.path(f"{group.tag}-staging.bin")
    write_random_file(staging, size)
    warm(staging)
    source = os.path.join(group.source_dir, "big.bin")
    targets = [os.path.join(group.target_dir(n), "big.bin") for n in group.receivers]
    result = measure(group, f"A-share, {size / MiB:.0f} MiB new file", lambda: os.rename(staging, source),
                     lambda: all(big_file_arrived(source, t, size) for t in targets), sub="big.bin")
    result["bytes"] = size
    return result


def b_small(group, count=10_000, size=4096):
    """B: `count` files of `size` bytes, in one new folder moved into the shared folder."""
    staging = group.run.path(f"{group.tag}-small-{count}")
    contents = write_small_files(staging, count, size)
    name = os.path.basename(staging)
    states = {n: {"seen": 0} for n in group.receivers}
    result = measure(group, f"B, {count:,} × {size} B", lambda: os.rename(staging, os.path.join(group.source_dir, name)),
                     lambda: all(small_files_arrived(os.path.join(group.target_dir(n), name), contents, states[n])
                                 for n in group.receivers), sub=name)
    result.update(files=count, file_bytes=size)
    return result


def c_delta(group, size, change=MiB, watch=False):
    """C: `change` random bytes rewritten in place in the middle of the synced big.bin."""
    source = os.path.join(group.source_dir, "big.bin")
    targets = [os.path.join(group.target_dir(n), "big.bin") for n in group.receivers]
    offset = size // 2 - change // 2
    new = os.urandom(change)
    what = f"C, {change / MiB:g} MiB rewritten in {size / MiB:.0f} MiB, " + ("from the write (watcher)" if watch else "rescan")
    result = measure(group, what, lambda: overwrite_in_place(source, new, offset),
                     lambda: all(change_arrived(source, t, new, offset) for t in targets), sub="big.bin",
                     trigger=not watch)
    result.update(bytes=size, changed_bytes=change)
    return result


def d_tree(group, plan, staging, digest):
    """D: a home-like tree moved into the (empty, shared) folder, pulled from nothing."""
    name = os.path.basename(staging)
    check = TreeArrival(plan, digest)
    source = os.path.join(group.source_dir, name)
    result = measure(group, f"D, home-like tree of {len(plan[1]):,} files",
                     lambda: os.rename(staging, source),
                     lambda: all(check(os.path.join(group.target_dir(n), name)) for n in group.receivers),
                     sub=name, timeout=1800, interval=0.5)
    result.update(files=len(plan[1]), directories=len(plan[0]) + 1, bytes=sum(s for _, s in plan[1]),
                  poll_interval_s=0.5)
    return result


def e_fanout(group, size):
    """E: A-share into a folder of four nodes; until all three receivers have the file."""
    result = a_share(group, size)
    result["receivers"] = len(group.receivers)
    return result


def f_idle(group, files, dirs, idle_seconds):
    """F: `files` tiny files in sync between two nodes; CPU % and RSS of each daemon over
    `idle_seconds` of idle, then one changed file's latency from the write (watcher on)."""
    root = os.path.join(group.source_dir, "many")
    pids = group.pids()
    cpu0 = {n: proc_cpu(p) for n, p in pids.items()}
    rss_max = {n: 0 for n in pids}
    t0 = time.monotonic()
    while time.monotonic() - t0 < idle_seconds:
        for n, p in pids.items():
            rss_max[n] = max(rss_max[n], proc_status(p).get("VmRSS") or 0)
        time.sleep(1.0)
    elapsed = time.monotonic() - t0
    cpu1 = {n: proc_cpu(p) for n, p in pids.items()}
    cpu = cpu_delta(cpu0, cpu1)
    idle = {"seconds": round(elapsed, 1),
            "cpu_percent": {n: round(100 * (c["user_s"] + c["system_s"]) / elapsed, 2) for n, c in cpu.items()},
            "max_rss": rss_max}
    log(f"  {group.tool} F idle {elapsed:.0f} s: CPU % {idle['cpu_percent']}, max RSS "
        f"{ {n: round(v / MiB) for n, v in rss_max.items()} } MiB")
    some = sorted(os.listdir(root))[len(os.listdir(root)) // 2]
    path = os.path.join(root, some, sorted(os.listdir(os.path.join(root, some)))[0])
    rel = os.path.relpath(path, group.source_dir)
    data = os.urandom(64)
    targets = [os.path.join(group.target_dir(n), rel) for n in group.receivers]

    def arrived():
        for t in targets:
            try:
                with open(t, "rb") as f:
                    if f.read() != data:
                        return False
            except OSError:
                return False
        return True

    def write():
        with open(path, "wb") as f:
            f.write(data)
    change = measure(group, "F, one file changed among many, from the write", write, arrived, trigger=False,
                     timeout=300, wait_settled=False)
    return {"files": files, "directories": dirs, "idle": idle, "change": change}


def f_populate(group, files, dirs, timeout):
    """Puts `files` tiny files in the shared folder and waits until every node has them in
    sync (not measured: F's figures are those of the idle folder)."""
    staging = group.run.path(f"{group.tag}-many")
    count = make_tiny_files(staging, files, dirs)
    os.rename(staging, os.path.join(group.source_dir, "many"))
    start = time.monotonic()
    group.trigger("many")
    time.sleep(1.0)
    group.settle(timeout)
    log(f"  {group.tool} F: {count:,} files in sync after {time.monotonic() - start:.0f} s")
    return count, round(time.monotonic() - start, 1)

