"""rsync's rows: an rsync daemon on 127.0.0.1 (plaintext), each workload with and without
`--fsync` (rsync ≥ 3.2.4 fsyncs every file it writes; without it, nothing is durable when
rsync returns, unlike both sync tools)."""
import os
import shutil
import time

from .files import drop_file_cache, same_content, set_aside, write_random_file, write_small_files
from .anchors import RsyncDaemon
from .procs import MiB, BenchError, load_average, log


def _push(run, tag, source, fsync, extra=(), prepare=None):
    daemon = RsyncDaemon(run, tag)
    try:
        if prepare:
            prepare(daemon)
        load = load_average()
        before, daemon_before = os.times(), daemon.children_cpu()
        seconds, wire = daemon.push(source, ["--fsync"] * fsync + list(extra))
        time.sleep(0.2)  # the daemon reaps the receiver it forked
        after, daemon_after = os.times(), daemon.children_cpu()
        # The client is our child; the receiving end is the daemon's (its children's CPU).
        cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system) \
            + (daemon_after - daemon_before)
        log(f"  rsync {tag}{' --fsync' if fsync else ''}: {seconds:.2f} s, wire {wire / MiB:.2f} MiB")
        return daemon, {"seconds": round(seconds, 2), "wire_bytes": wire, "fsync": fsync, "cpu_s": round(cpu, 2),
                        "load_average": load}
    finally:
        daemon.close()


def rsync_b(run, count, fsync, size=4096):
    staging = run.path(f"rsync-small-{int(fsync)}")
    write_small_files(staging, count, size)
    os.sync()
    daemon, result = _push(run, f"b{int(fsync)}", staging, fsync)
    set_aside(run.work, staging)
    set_aside(run.work, daemon.root)
    return result


def rsync_c(run, size, fsync, change=MiB):
    """The daemon holds the file already (pushed before the clock); 1 MiB rewritten in the
    middle is pushed with rsync's delta algorithm (--no-whole-file)."""
    big = run.path(f"rsync-big-{int(fsync)}.bin")
    write_random_file(big, size)

    def prepare(daemon):
        daemon.push(big, ["--whole-file"])
        fd = os.open(big, os.O_WRONLY)
        try:
            os.pwrite(fd, os.urandom(change), size // 2 - change // 2)
        finally:
            os.close(fd)
        os.sync()
    daemon, result = _push(run, f"c{int(fsync)}", big, fsync, ["--no-whole-file"], prepare)
    target = os.path.join(daemon.target, os.path.basename(big))
    if not same_content(big, target):
        raise BenchError("rsync C: the daemon's copy differs")
    for p in (big, target):
        drop_file_cache(p)
    os.unlink(big)
    shutil.rmtree(daemon.root, ignore_errors=True)
    return result


def rsync_tree(run, tree, fsync):
    os.sync()
    daemon, result = _push(run, f"d{int(fsync)}", tree, fsync)
    set_aside(run.work, daemon.root)
    return result
