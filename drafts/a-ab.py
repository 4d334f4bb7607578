#!/usr/bin/env python3
"""Workload A-send (one 1 GiB file, `send`) for an A/B: each --syncpeer binary in turn, --runs
times; seconds and CPU-s of both daemons, medians per binary. Optional: perf record of both
daemons (--perf DIR). Run in a netns:
ip netns exec NS python3 drafts/a-ab.py --syncpeer OLD --syncpeer NEW --runs 3"""
import argparse, os, statistics, subprocess, sys, time, types
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import bench as B

p = argparse.ArgumentParser()
p.add_argument("--syncpeer", required=True, action="append")
p.add_argument("--size", type=int, default=B.GiB)
p.add_argument("--perf", default="")
p.add_argument("--runs", type=int, default=1)
p.add_argument("--verify", action="store_true", help="compare each received file with the source")
a = p.parse_args()
args = types.SimpleNamespace(syncpeer=a.syncpeer[0], tmp=os.environ.get("TMPROOT", "/tmp"), window=0, folder_timeout=120, size=a.size)
bench = B.Bench(args)
source = os.path.join(bench.work, "a.bin")
B.write_random_file(source, a.size)
B.warm(source)
rows = {}
try:
    for run in range(a.runs * len(a.syncpeer)):
        binary = a.syncpeer[run % len(a.syncpeer)]
        bench.syncpeer = binary
        alice, bob, inbox = bench.pair(f"a{run}")
        perfs = []
        if a.perf:
            os.makedirs(a.perf, exist_ok=True)
            for d in (alice, bob):
                perfs.append(B.track(subprocess.Popen(["perf", "record", "-F", "999", "-g", "-p", str(d.pid), "-o",
                            os.path.join(a.perf, f"{d.name}-a{run}.data")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
            time.sleep(0.5)
        c0 = (alice.cpu(), bob.cpu())
        elapsed, final, events = bench.send(alice, source)
        c1 = (alice.cpu(), bob.cpu())
        def hwm(d):
            for line in open(f"/proc/{d.pid}/status"):
                if line.startswith("VmHWM:"): return round(int(line.split()[1]) / 1024, 1)
        peaks = (hwm(alice), hwm(bob))
        for pp in perfs:
            pp.send_signal(2); pp.wait()
        cpu = [round(sum(c1[i]) - sum(c0[i]), 2) for i in range(2)]
        detail = [(round(c1[i][0] - c0[i][0], 2), round(c1[i][1] - c0[i][1], 2)) for i in range(2)]
        print(f"{os.path.basename(os.path.dirname(os.path.dirname(binary)))}:{binary[-30:]} {elapsed:.2f} s "
              f"alice {cpu[0]} {detail[0]} bob {cpu[1]} {detail[1]} peak RSS MiB {peaks} load {os.getloadavg()[0]:.2f}", flush=True)
        rows.setdefault(binary, []).append((elapsed, cpu[0], cpu[1]))
        alice.stop(); bob.stop()
        received = os.path.join(inbox, os.path.basename(source))
        if a.verify:
            import filecmp
            print("  received file identical:", filecmp.cmp(source, received, shallow=False), flush=True)
        os.unlink(received)
    for binary, r in rows.items():
        print(binary, "median", *[round(statistics.median(x[i] for x in r), 2) for i in range(3)])
finally:
    B.kill_started()
    import shutil; shutil.rmtree(bench.work, ignore_errors=True)
