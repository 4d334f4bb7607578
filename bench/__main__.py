"""python3 -m bench (from the repository's root; bench/run.sh does it for `make bench`)."""
import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

from . import folders, growth, limits, relay, send
from .files import home_tree_plan, set_aside, tree_digest, write_random_file, write_tree
from .anchors import SyncthingGroup, rsync_version, syncthing_version
from .peers import Run, SyncpeerGroup
from .procs import GiB, MiB, BenchError, RSSSampler, kill_started, load_average, log
from .report import table
from .rsync import rsync_b, rsync_c, rsync_tree

PHASES = ("limits", "a_send", "large", "resume", "folders", "relay", "syncthing", "rsync", "d", "e", "f", "growth")


def options():
    full = os.environ.get("BENCH_FULL") == "1"
    p = argparse.ArgumentParser(prog="python3 -m bench", description=__doc__)
    p.add_argument("--syncpeer", required=True, help="the release-built syncpeer binary")
    p.add_argument("--bench-bin", required=True, help="the release-built syncpeer-bench binary")
    p.add_argument("--size", type=int, default=GiB, help="A's and C's file size (default 1 GiB)")
    p.add_argument("--b-files", type=int, default=10_000, help="B's file count (default 10,000)")
    p.add_argument("--d-files", type=int, default=50_000)
    p.add_argument("--d-bytes", type=int, default=2 * GiB)
    p.add_argument("--d-dirs", type=int, default=5_000)
    p.add_argument("--e-size", type=int, default=GiB)
    p.add_argument("--e-limit", type=int, default=25_000_000,
                   help="E-limited: alice's upload in bytes/s (default 25,000,000: 200 Mbit/s; 0 skips it)")
    p.add_argument("--f-files", type=int, default=1_000_000 if full else 100_000, help="syncpeer's F folder")
    p.add_argument("--f-syncthing-files", type=int, default=100_000, help="Syncthing's F folder")
    p.add_argument("--f-idle", type=float, default=300 if full else 60, help="seconds of idle measured in F")
    p.add_argument("--growth-a", default="64MiB,1GiB,8GiB" if full else "64MiB,1GiB")
    p.add_argument("--growth-b", default="1000,10000,100000" if full else "1000,10000")
    p.add_argument("--large-size", type=int, default=4 * GiB, help="the memory run's file (0 skips it)")
    p.add_argument("--relay-size", type=int, default=GiB, help="R's file, through a local strelaysrv (default 1 GiB; 0 skips it)")
    p.add_argument("--window", type=int, default=0, help="SYNCPEER_SEND_WINDOW (default: the daemon's)")
    p.add_argument("--resume-timeout", type=float, default=180)
    p.add_argument("--timeout", type=float, default=900, help="seconds any one wait may take")
    p.add_argument("--tmp", default="/tmp", help="where the temporary directory goes")
    p.add_argument("--output", default=".build/bench/results.json")
    p.add_argument("--skip", action="append", default=[], help="comma-separated phases to skip: " + ",".join(PHASES)
                   + " (syncthing and rsync: those tools everywhere)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (logs)")
    args = p.parse_args()
    args.full = full
    args.skip = {x for v in args.skip for x in v.split(",") if x}
    if not shutil.which("syncthing"):
        args.skip.add("syncthing")
    if not shutil.which("rsync"):
        args.skip.add("rsync")
    if not shutil.which("strelaysrv"):
        args.skip.add("relay")
    return args


def guarded(results, key, body):
    """Runs one phase; a failure is recorded under `key` (error) and the run goes on."""
    try:
        return body()
    except (BenchError, subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as error:
        log(f"FAILED {key}: {error}")
        results.setdefault("errors", {})[key] = str(error)
        return None


def run_phases(args, run, results, sampler):
    sp, st, rs, rf = (results.setdefault(k, {}) for k in ("syncpeer", "syncthing", "rsync", "rsync_fsync"))
    use_st, use_rs = "syncthing" not in args.skip, "rsync" not in args.skip
    big = run.path("big.bin")
    if not {"limits", "a_send"} <= args.skip:
        log(f"writing {args.size / MiB:.0f} MiB of random data")
        write_random_file(big, args.size)
    if "limits" not in args.skip:
        guarded(results, "limits", lambda: limits.measure_limits(run, results, big))
    if "a_send" not in args.skip:
        sp["a_send"] = guarded(results, "a_send", lambda: send.a_send(run, big, sampler))
        if use_rs:
            rs["a_send"] = rs["a_share"] = guarded(results, "rsync a", lambda: send.rsync_push(run, big, "a", False))
            rf["a_send"] = rf["a_share"] = guarded(results, "rsync a", lambda: send.rsync_push(run, big, "af", True))
    if "large" not in args.skip and args.large_size > 0:
        large = run.path("large.bin")
        write_random_file(large, args.large_size)
        sp["large"] = guarded(results, "large", lambda: send.a_send(run, large, sampler, key="large"))
        os.unlink(large)
    if "resume" not in args.skip:
        other = run.path("resume.bin")  # other content: nothing of the first send can be reused
        write_random_file(other, args.size)
        clean = (sp.get("a_send") or {}).get("seconds")
        sp["resume"] = guarded(results, "resume", lambda: send.resume(run, other, args.resume_timeout, clean))
        os.unlink(other)
    if os.path.exists(big):
        os.unlink(big)

    if "folders" not in args.skip:
        # A-share, B, C and C from the write: syncpeer, then Syncthing, then rsync, workload by
        # workload, so that every tool sees the same load on this shared machine.
        groups = []
        try:
            ours = SyncpeerGroup(run, "folders", 2, sampler)
            groups.append(ours)
            empty = run.path("folders-share")
            os.makedirs(empty)
            ours.share(empty, args.timeout)
            theirs = None
            if use_st:
                theirs = guarded(results, "syncthing start", lambda: SyncthingGroup(run, "folders", 2, sampler))
                if theirs:
                    groups.append(theirs)
            for key, body in (("a_share", lambda g: folders.a_share(g, args.size)),
                              ("b", lambda g: folders.b_small(g, args.b_files)),
                              ("c", lambda g: folders.c_delta(g, args.size))):
                sp[key] = guarded(results, f"syncpeer {key}", lambda: body(ours))
                if theirs:
                    st[key] = guarded(results, f"syncthing {key}", lambda: body(theirs))
            sp["c_watch"] = guarded(results, "syncpeer c_watch", lambda: folders.c_delta(ours, args.size, watch=True))
            if theirs:
                theirs.watcher(True, 1)
                st["c_watch"] = guarded(results, "syncthing c_watch",
                                        lambda: folders.c_delta(theirs, args.size, watch=True))
                st["c_watch"] and st["c_watch"].update(watch_delay_s=1, note="fsWatcherDelayS 1 (its default is 10)")
        finally:
            for g in groups:
                g.close()
        if use_st:
            # Syncthing's case checks list a folder again after every file it creates (the
            # cache is dropped): B's 10,000 files in one folder cost it O(n²). The same B with
            # those checks off, which its documentation offers on case-sensitive file systems.
            def case_b():
                g = SyncthingGroup(run, "case", 2, sampler, case_sensitive=True)
                try:
                    r = folders.b_small(g, args.b_files)
                    r["note"] = "caseSensitiveFS=true (Syncthing's default is false)"
                    return r
                finally:
                    g.close()
            results.setdefault("syncthing_case", {})["b"] = guarded(results, "syncthing_case b", case_b)
        if use_rs:
            rs["b"], rf["b"] = (guarded(results, "rsync b", lambda f=f: rsync_b(run, args.b_files, f)) for f in (False, True))
            rs["c"], rf["c"] = (guarded(results, "rsync c", lambda f=f: rsync_c(run, args.size, f)) for f in (False, True))

    if "relay" not in args.skip:
        relay.measure(args, run, results, sampler, guarded)
    if "d" not in args.skip:
        phase_d(args, run, results, sampler)
    if "e" not in args.skip:
        phase_e(args, run, results, sampler)
    if "f" not in args.skip:
        phase_f(args, run, results, sampler)
    if "growth" not in args.skip:
        results["growth"] = guarded(results, "growth", lambda: growth.measure(run, args, results, sampler)) or {}


def in_group(run, results, key, factory, body, share=True, timeout=900):
    """A fresh group for one workload: made, its (empty) folder shared, `body(group)`, closed."""
    def go():
        group = factory()
        try:
            if share:
                empty = run.path(f"{key}-share")
                os.makedirs(empty)
                group.share(empty, timeout)
            return body(group)
        finally:
            group.close()
            if isinstance(group, SyncpeerGroup) and group.source_dir:
                set_aside(run.work, group.source_dir)
    return guarded(results, key, go)


def phase_d(args, run, results, sampler):
    plan = home_tree_plan(args.d_files, args.d_bytes, args.d_dirs)
    tree = run.path("home-tree")
    log(f"D: writing a home-like tree: {args.d_files:,} files, {args.d_bytes / MiB:,.0f} MiB, {args.d_dirs:,} folders")
    write_tree(tree, plan)
    digest = tree_digest(tree, [path for path, _ in plan[1]])

    def tool(group):
        result = folders.d_tree(group, plan, tree, digest)
        # The tree goes back to its place for the next tool (the group's nodes are stopped
        # first, so nothing syncs its removal).
        group.close()
        os.rename(os.path.join(group.source_dir, os.path.basename(tree)), tree)
        return result
    results["syncpeer"]["d"] = in_group(run, results, "d", lambda: SyncpeerGroup(run, "d", 2, sampler), tool)
    if "syncthing" not in args.skip:
        results["syncthing"]["d"] = in_group(run, results, "d-st", lambda: SyncthingGroup(run, "d", 2, sampler), tool)
        # Its case checks cost it here too (each new file's folder and its parents are listed
        # again): the same tree with them off.
        results.setdefault("syncthing_case", {})["d"] = in_group(
            run, results, "d-stc", lambda: SyncthingGroup(run, "dc", 2, sampler, case_sensitive=True), tool)
    if "rsync" not in args.skip:
        for key, fsync in (("rsync", False), ("rsync_fsync", True)):
            results[key]["d"] = guarded(results, f"{key} d", lambda f=fsync: rsync_tree(run, tree, f))


def phase_e(args, run, results, sampler):
    def ours(group):
        meshed = group.mesh()
        result = folders.e_fanout(group, args.e_size)
        result["receivers_share_with_each_other"] = meshed
        return result
    results["syncpeer"]["e"] = in_group(run, results, "e", lambda: SyncpeerGroup(run, "e", 4, sampler), ours)
    if "syncthing" not in args.skip:
        results["syncthing"]["e"] = in_group(run, results, "e-st", lambda: SyncthingGroup(run, "e", 4, sampler),
                                             lambda g: folders.e_fanout(g, args.e_size))
    if args.e_limit <= 0:
        return
    # E-limited: the same with alice's upload capped (a home server's uplink): the receivers
    # must fetch from each other to finish sooner than three copies through it.
    rate = args.e_limit
    slow = dict(run.env, SYNCPEER_SERVE_RATE=str(rate))
    results["syncpeer"]["e_limited"] = in_group(
        run, results, "el", lambda: SyncpeerGroup(run, "el", 4, sampler, alice_env=slow), ours)
    if "syncthing" not in args.skip:
        def theirs(group):
            group.limit_upload("alice", rate)
            return folders.e_fanout(group, args.e_size)
        results["syncthing"]["e_limited"] = in_group(run, results, "el-st", lambda: SyncthingGroup(run, "el", 4, sampler), theirs)


def phase_f(args, run, results, sampler):
    def body(files):
        def go(group):
            count, seconds = folders.f_populate(group, files, max(1, files // 1000), args.timeout * 2)
            if isinstance(group, SyncthingGroup):
                group.watcher(True, 1)  # the change is timed from the write, as syncpeer's
            result = folders.f_idle(group, count, max(1, files // 1000), args.f_idle)
            result["populate_seconds"] = seconds
            return result
        return go
    f = in_group(run, results, "f", lambda: SyncpeerGroup(run, "f", 2, sampler), body(args.f_files))
    results["syncpeer"]["f"] = f
    results["syncpeer"]["f_change"] = (f or {}).get("change")
    if "syncthing" not in args.skip:
        f = in_group(run, results, "f-st", lambda: SyncthingGroup(run, "f", 2, sampler), body(args.f_syncthing_files))
        results["syncthing"]["f"] = f
        results["syncthing"]["f_change"] = (f or {}).get("change")


def main():
    args = options()
    signal.signal(signal.SIGTERM, lambda n, f: (_ for _ in ()).throw(SystemExit(128 + n)))
    signal.signal(signal.SIGHUP, lambda n, f: (_ for _ in ()).throw(SystemExit(128 + n)))
    results = {"machine": {
        "cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "load_average_start": load_average(),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or None,
        "full": args.full, "syncthing": syncthing_version() if "syncthing" not in args.skip else None,
        "rsync": rsync_version() if "rsync" not in args.skip else None}, "limits": {}}
    run = Run(args, tempfile.mkdtemp(prefix="syncpeer-bench-", dir=args.tmp))
    sampler = RSSSampler()
    sampler.start()
    status = 0
    try:
        log(f"working in {run.work} ({'directories spread over fresh block groups' if run.spread else 'not ext4'}); "
            f"load average {results['machine']['load_average_start']}")
        run_phases(args, run, results, sampler)
    except (Exception, KeyboardInterrupt, SystemExit) as error:  # the figures so far are still written
        log(f"FAILED: {error!r}\n{traceback.format_exc()}")
        results["error"] = repr(error)
        status = 1
    finally:
        sampler.stop()
        kill_started()
    if results.get("errors"):
        status = 1
    results["machine"]["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results["machine"]["load_average_end"] = load_average()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(results, f, indent=2, sort_keys=True)
        f.write("\n")
    m = results["machine"]
    print(f"\nsyncpeer benchmark at {m['commit']}, {m['cpus']} CPUs, loopback; Syncthing {m['syncthing']}, "
          f"{m['rsync']}; load average at start {m['load_average_start']}, at end {m['load_average_end']} "
          f"(other processes compete for the CPUs: figures vary run to run)")
    print(table(results))
    for key, error in (results.get("errors") or {}).items():
        print(f"FAILED {key}: {error}")
    print(f"\nJSON: {args.output}", flush=True)
    if args.keep:
        log(f"kept {run.work} (daemon logs: {', '.join(os.path.basename(p) for p in run.daemon_logs[:4])} …)")
    else:
        log(f"removing {run.work}")
        shutil.rmtree(run.work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
