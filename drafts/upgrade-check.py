#!/usr/bin/env python3
"""Upgrade across a content-hash change (protocol 2 BLAKE2b → 3 SHA-256 → 4 BLAKE3) with real daemons: two nodes sync a
folder with the OLD binary, stop; alice edits one file while down; both restart with the NEW
binary on the same homes and ports. Checks: bob converges to alice's tree, no conflict copies,
the deletion made before the upgrade stays, and a later edit still syncs. Run in a netns:
ip netns exec NS python3 drafts/upgrade-check.py --old OLD --new NEW"""
import argparse, filecmp, json, os, sys, time, types
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import bench as B

p = argparse.ArgumentParser()
p.add_argument("--old", required=True)
p.add_argument("--new", required=True)
a = p.parse_args()
bench = B.Bench(types.SimpleNamespace(syncpeer=a.old, tmp="/tmp", window=0, folder_timeout=120))

def tree(root):
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".syncpeer")]
        for f in files:
            if f.startswith(".syncpeer"): continue
            full = os.path.join(d, f)
            out[os.path.relpath(full, root)] = open(full, "rb").read()
    return out

try:
    alice, bob, inbox, _ = B.folder_pair(bench, "u")
    docs = os.path.join(bench.work, "docs")
    os.makedirs(os.path.join(docs, "sub"))
    for i in range(20):
        with open(os.path.join(docs, "sub" if i % 2 else "", f"f{i}.bin"), "wb") as f: f.write(os.urandom(1000 + i * 997))
    with open(os.path.join(docs, "big.bin"), "wb") as f: f.write(os.urandom(3 << 20))
    bench.run_cli("--home", alice.home, "share", docs, "--with", "bob")
    target = os.path.join(inbox, "docs")
    B.wait_until("bob has alice's files (old)", 60, lambda: os.path.isdir(target) and tree(target) == tree(docs), 0.2)
    os.unlink(os.path.join(docs, "f0.bin"))
    B.wait_until("the deletion reaches bob (old)", 60, lambda: tree(target) == tree(docs), 0.2)
    addresses = (alice.address, bob.address)
    alice.stop(); bob.stop()
    with open(os.path.join(docs, "f2.bin"), "wb") as f: f.write(b"edited while down " * 100)
    bench.syncpeer = a.new
    env = dict(bench.env, **B.FOLDER_ENV)
    t0 = time.monotonic()
    alice = B.Daemon(bench, "alice", alice.home, listen=addresses[0], env=env)
    bob = B.Daemon(bench, "bob", bob.home, ["--receive-dir", inbox, "--auto-accept"], listen=addresses[1], env=env)
    print(f"new daemons listening after {time.monotonic() - t0:.2f} s")
    alice.wait_connected("bob"); bob.wait_connected("alice")
    B.wait_until("bob converges after the upgrade", 90, lambda: tree(target) == tree(docs), 0.2)
    print(f"converged {time.monotonic() - t0:.2f} s after the restart")
    with open(os.path.join(docs, "big.bin"), "r+b") as f: f.seek(1 << 20); f.write(os.urandom(4096))
    B.wait_until("a later edit syncs", 60, lambda: tree(target) == tree(docs), 0.2)
    time.sleep(2)
    conflicts = [k for k in list(tree(docs)) + list(tree(target)) if "sync-conflict" in k]
    assert not conflicts, conflicts
    assert "f0.bin" not in tree(target) and "f0.bin" not in tree(docs), "deleted file came back"
    for d in (alice, bob):
        st = json.loads(bench.run_cli("--home", d.home, "status", "--json"))
        print(d.name, [(f.get("state"), f.get("error")) for f in st.get("folders", [])])
    errors = [e for d in (alice, bob) for _, e in d.events if e.get("event") == "error"]
    print("error events:", errors[:5], len(errors))
    print("UPGRADE OK")
finally:
    B.kill_started()
    import shutil; shutil.rmtree(bench.work, ignore_errors=True)
