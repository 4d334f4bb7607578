#!/usr/bin/env python3
"""Workload B (10,000 x 4 KiB) for an A/B: each --syncpeer binary in turn, --runs times, in one
script (trees kept until the end, see bench.set_aside); the arrival curve on bob, CPU-s of both
daemons, medians per binary. Optional: perf record of both daemons (--perf DIR).
Run in a netns: ip netns exec NS python3 drafts/b-ab.py --syncpeer OLD --syncpeer NEW --runs 3 --quiet"""
import argparse, json, os, shutil, subprocess, sys, threading, time, types
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import bench as B

p = argparse.ArgumentParser()
p.add_argument("--syncpeer", required=True, action="append")
p.add_argument("--count", type=int, default=10000)
p.add_argument("--perf", default="")
p.add_argument("--runs", type=int, default=1)
p.add_argument("--quiet", action="store_true")
p.add_argument("--trace", default="", help="perf trace -s of bob's syscalls (per thread: count, total ms) into this directory")
p.add_argument("--timeline", action="store_true", help="print both daemons' CPU and bob's file count every 0.3 s")
p.add_argument("--settle", type=float, default=35, help="seconds to wait first: ext4 without a journal makes every file creation "
               "slow for ~30 s after a large deletion (recently_deleted), e.g. the previous script's trees")
a = p.parse_args()
time.sleep(a.settle)
args = types.SimpleNamespace(syncpeer=a.syncpeer[0], tmp=os.environ.get("TMPROOT", "/tmp"), window=0, folder_timeout=120)
bench = B.Bench(args)
if os.environ.get('TRACE'): B.FOLDER_ENV['SYNCPEER_TRACE_PULL'] = '1'
results = []
def rss(pid):
    # "anon+file" MiB from /proc/PID/status
    fields = {}
    try:
        for line in open(f"/proc/{pid}/status"):
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile"): fields[key] = int(value.split()[0]) >> 10
    except OSError:
        pass
    return f"{fields.get('RssAnon', 0)}+{fields.get('RssFile', 0)}"
try:
  for run in range(a.runs * len(a.syncpeer)):
    binary = a.syncpeer[run % len(a.syncpeer)]
    bench.syncpeer = binary
    tag = f"r{run}"
    alice, bob, inbox, _ = B.folder_pair(bench, tag)
    shared = os.path.join(bench.work, f"small-{tag}")
    os.makedirs(shared)
    for i in range(a.count):
        with open(os.path.join(shared, f"f{i:05d}.bin"), "wb") as f:
            f.write(os.urandom(4096))
    # SYNCFIRST=1: the tree is on disk before the clock (as make bench does); =alt: every other round
    synced = os.environ.get("SYNCFIRST") == "1" or (os.environ.get("SYNCFIRST") == "alt" and (run // len(a.syncpeer)) % 2 == 1)
    if synced:
        os.sync()
    target = os.path.join(inbox, os.path.basename(shared))
    curve = []
    stop = [False]
    def poll():
        while not stop[0]:
            try:
                n = sum(1 for e in os.scandir(target) if not B.is_own_name(e.name))
            except FileNotFoundError:
                n = -1
            curve.append((time.monotonic(), n, sum(alice.cpu()), sum(bob.cpu()), rss(alice.pid), rss(bob.pid))
                         if a.timeline else (time.monotonic(), n))
            time.sleep(0.02)
    perfs = []
    if a.perf:
        os.makedirs(a.perf, exist_ok=True)
        for d in (alice, bob):
            perfs.append(B.track(subprocess.Popen(["perf", "record"] + (os.environ["PERFEV"].split() if os.environ.get("PERFEV") else ["-F", "999"]) + ["-g", "-p", str(d.pid), "-o",
                        os.path.join(a.perf, f"{d.name}-{tag}.data")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        time.sleep(0.5)
    if a.trace:
        os.makedirs(a.trace, exist_ok=True)
        perfs.append(B.track(subprocess.Popen(["perf", "trace"] + ([] if os.environ.get("FULL") else ["-s"]) + ["-p", str(bob.pid), "-o",
                    os.path.join(a.trace, f"bob-{tag}.txt")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        time.sleep(0.5)
    cpu0 = {"alice": alice.cpu(), "bob": bob.cpu()}
    t = threading.Thread(target=poll, daemon=True); t.start()
    start = time.monotonic()
    bench.run_cli("--home", alice.home, "share", shared, "--with", "bob")
    shared_at = time.monotonic() - start
    B.wait_until("all", 120, lambda: curve and curve[-1][1] == a.count, interval=0.02)
    end = curve[-1][0] - start
    stop[0] = True
    cpu1 = {"alice": alice.cpu(), "bob": bob.cpu()}
    time.sleep(0.3)
    for pp in perfs:
        pp.send_signal(2); pp.wait()
    if a.timeline:
        prev = curve[0]
        every = int(os.environ.get("TIMELINE_EVERY", "15"))
        for c in curve[every::every] + [curve[-1]]:
            print(f"   {c[0] - start:5.2f}s files {c[1]:6d}  alice {c[2] - prev[2]:5.2f} bob {c[3] - prev[3]:5.2f} CPU-s"
                  f"  RSS (anon+file) alice {c[4]} bob {c[5]} MiB")
            prev = c
        curve = [c[:2] for c in curve]
    first = next((tt for tt, n in curve if n > 0), None)
    def at(frac):
        return next((tt - start for tt, n in curve if n >= frac * a.count), None)
    print(f"run {run} synced={synced}: total {end:.2f}s share-cmd {shared_at:.2f}s first-file {first - start if first else None:.2f}s "
          f"25% {at(.25):.2f} 50% {at(.5):.2f} 75% {at(.75):.2f} 100% {at(1):.2f}  load {open('/proc/loadavg').read().split()[0]}")
    for n in ("alice", "bob"):
        print(f"   cpu {n}: user {cpu1[n][0]-cpu0[n][0]:.2f} sys {cpu1[n][1]-cpu0[n][1]:.2f}")
    for d in (alice, bob):
        hwm = B.proc_status(d.pid).get("VmHWM", 0)
        print(f"   peak RSS {d.name}: {hwm / (1 << 20):.0f} MiB")
    if not a.quiet:
        for d in (alice, bob):
            for tt, e in d.events:
                if tt < start - 0.1: continue
                ev = e.get("event")
                if ev in ("progress",): continue
                s = json.dumps(e)[:160]
                print(f"   {d.name} {tt - start:7.3f} {s}")
    results.append((os.path.basename(binary), end, cpu1["alice"][0]+cpu1["alice"][1]-cpu0["alice"][0]-cpu0["alice"][1], cpu1["bob"][0]+cpu1["bob"][1]-cpu0["bob"][0]-cpu0["bob"][1]))
    print("binary", binary)
    alice.stop(); bob.stop()
    if os.environ.get("DROPTREES"):
        # DROPTREES=1 (for a tmpfs TMPROOT, where deleting is cheap): each run's trees go after
        # it. With ~10 runs' trees kept (~800 MB of tmpfs), every binary's B got 40-60 % slower.
        for name in (f"alice-{tag}", f"bob-{tag}", f"inbox-{tag}", f"small-{tag}"):
            shutil.rmtree(os.path.join(bench.work, name), ignore_errors=True)
    os.makedirs('/tmp/wtb', exist_ok=True)
    for l in bench.daemon_logs: shutil.copy(l + '.stderr', '/tmp/wtb/' + os.path.basename(l) + '.stderr')
    print('start', start)
  for b in a.syncpeer:
    rs = [r for r in results if r[0] == os.path.basename(b)]
    ts = sorted(r[1] for r in rs)
    print("totals", os.path.basename(b), [round(r[1], 2) for r in rs], "median", ts[len(ts)//2],
          "cpu alice", [round(r[2], 2) for r in rs], "bob", [round(r[3], 2) for r in rs])
finally:
    B.kill_started()
    if os.environ.get("KEEP"):
        # KEEP=DIR: the trees are moved there, not deleted: ext4 without a journal makes every
        # creation slow for 60-360 s after a mass deletion (recently_deleted), also the next run's.
        os.makedirs(os.environ["KEEP"], exist_ok=True)
        os.rename(bench.work, os.path.join(os.environ["KEEP"], os.path.basename(bench.work) + f"-{os.getpid()}"))
    else:
        shutil.rmtree(bench.work, ignore_errors=True)
