#!/usr/bin/env python3
"""Workload A-share (a new 1 GiB file in a shared folder) with a timeline: CPU-s of each daemon
and bytes through the bench's counting proxy every 0.1 s (printed every 0.3 s), so the phases
(alice's scan, the pull, the final writeback) and idle gaps show. PERF=1 also records both
daemons with perf (/tmp/ash-alice.data, /tmp/ash-bob.data). Run in a netns:
ip netns exec NS python3 drafts/ashare-timeline.py .build/x86_64-unknown-linux-gnu/release/syncpeer"""
import os, shutil, subprocess, sys, threading, time, types
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import bench as B

args = types.SimpleNamespace(syncpeer=sys.argv[1], tmp="/tmp", window=0, folder_timeout=120, size=B.GiB)
bench = B.Bench(args)
try:
    alice, bob, inbox, relay = B.folder_pair(bench, "tl", proxy=True)
    shared = os.path.join(bench.work, "share-folder")
    os.makedirs(shared)
    source = os.path.join(shared, "big.bin")
    B.write_random_file(source, B.GiB)
    B.warm(source)
    target = os.path.join(inbox, "share-folder", "big.bin")
    samples, stop = [], [False]

    def sample():
        t0 = time.monotonic()
        while not stop[0]:
            up, down = relay.counters()
            samples.append((time.monotonic() - t0, sum(alice.cpu()), sum(bob.cpu()), up, down))
            time.sleep(0.1)
    perfs = [B.track(subprocess.Popen(["perf", "record", "-F", "999", "-g", "-p", str(d.pid), "-o", f"/tmp/ash-{d.name}.data"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
             for d in (alice, bob)] if os.environ.get("PERF") else []
    if os.environ.get("STRACE"):  # bob's durability calls with their durations
        perfs.append(B.track(subprocess.Popen(["strace", "-f", "-tt", "-T", "-p", str(bob.pid), "-o", "/tmp/ash-bob.strace",
                                               "-e", "trace=fdatasync,fsync,sync_file_range,renameat,renameat2,rename,syncfs,fadvise64,ftruncate,fallocate"],
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    time.sleep(0.5 if perfs else 0)
    thread = threading.Thread(target=sample)
    thread.start()
    start = time.monotonic()
    print("start wall", time.time())
    bench.run_cli("--home", alice.home, "share", shared, "--with", "bob")
    elapsed = B.wait_for_arrival("the shared file on bob", 120,
                                 lambda: os.path.exists(target) and os.path.getsize(target) == B.GiB) - start
    time.sleep(0.3)
    stop[0] = True
    thread.join()
    for p in perfs:
        p.send_signal(2)
        p.wait()
    print("elapsed", round(elapsed, 2))
    prev = samples[0]
    for s in samples[1::int(os.environ.get("STRIDE", "3"))]:
        print(f"{s[0]:5.1f}s alice {s[1] - prev[1]:5.2f} bob {s[2] - prev[2]:5.2f} CPU-s  "
              f"up {(s[3] - prev[3]) / 2**20:7.1f} MiB  down {(s[4] - prev[4]) / 2**10:7.1f} KiB")
        prev = s
finally:
    B.kill_started()
    shutil.rmtree(bench.work, ignore_errors=True)
