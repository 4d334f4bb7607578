"""A-send: one file sent with `syncpeer send` (until the receiver has fsynced it), the same file
pushed to an rsync daemon with and without --fsync; the large-file memory run; a resume after
the receiver is SIGKILLed at 50 %."""
import json
import os
import shutil
import signal
import subprocess
import threading
import time

from .files import drop_file_cache, quiet_disk, same_content, warm
from .anchors import RsyncDaemon
from .peers import SyncpeerDaemon, SyncpeerGroup, reset_peak
from .procs import MB, MiB, BenchError, cpu_delta, load_average, log, track


def chunk_parameters(size):
    """ChunkParameters.forFileSize (Sources/PeerFiles/Chunker.swift), for the report."""
    guess = -(-size // 2000)
    average = 64 << 10
    while average < guess and average < 4 * MiB:
        average <<= 1
    return f"average {average // 1024} KiB, max {4 * average // 1024} KiB"


def send_file(group, path, on_progress=None, timeout=900):
    """`syncpeer send PATH --to bob --json` on alice: (seconds, final event, [(t, event)])."""
    run = group.run
    command = [run.syncpeer, "--home", group.alice.home, "send", path, "--to", "bob", "--json"]
    start = time.monotonic()
    proc = track(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, env=run.env, text=True))
    events = []
    timer = threading.Timer(timeout, lambda: proc.poll() is None and os.kill(proc.pid, signal.SIGKILL))
    timer.start()
    try:
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            events.append((time.monotonic() - start, event))
            if on_progress:
                on_progress(event)
        stderr = proc.stderr.read()
        proc.wait()
    finally:
        timer.cancel()
    elapsed = time.monotonic() - start
    if proc.returncode != 0 or not events:
        if proc.returncode == -signal.SIGKILL and elapsed >= timeout:
            raise BenchError(f"send did not finish within {timeout} s; last event: {events[-1][1] if events else None}")
        raise BenchError(f"send failed ({proc.returncode}) after {elapsed:.1f} s: {stderr.strip()}")
    return elapsed, events[-1][1], events


def phase_times(events):
    """(seconds until the first byte was confirmed active, seconds of the active phase)."""
    first_active = next((t for t, e in events if e.get("state") == "active"), None)
    end = events[-1][0]
    return first_active, (end - first_active) if first_active is not None else None


def a_send(run, source, sampler, key="a_send"):
    """A-send of `source`; figures: seconds, MB/s, CPU-s and peak RSS of each daemon."""
    group = SyncpeerGroup(run, key, 2, sampler)
    try:
        return send_measured(group, source, sampler, key)
    finally:
        group.close()


def send_measured(group, source, sampler=None, key="a_send"):
    """`source` sent from alice to bob in `group` (paired, idle); the received copy is checked
    and removed. The figures of `a_send`."""
    size = os.path.getsize(source)
    alice, bob = group.alice, group.nodes["bob"]
    for d in (alice, bob):
        reset_peak(d.pid)
    warm(source)
    quiet_disk()
    load = load_average()
    cpu0 = {"alice": alice.cpu(), "bob": bob.cpu()}
    log(f"{key}: syncpeer send {size / MiB:.0f} MiB alice → bob")
    elapsed, final, events = send_file(group, source)
    cpu1 = {"alice": alice.cpu(), "bob": bob.cpu()}
    memory = {"alice": alice.memory(), "bob": bob.memory()}
    if final.get("state") != "completed":
        raise BenchError(f"{key}: final state {final.get('state')}: {final}")
    received = os.path.join(group.inbox["bob"], os.path.basename(source))
    if not same_content(source, received):
        raise BenchError(f"{key}: the received file differs from the source")
    prepare, active = phase_times(events)
    result = {
        "bytes": size, "seconds": round(elapsed, 2), "mb_s": round(size / MB / elapsed, 1),
        "prepare_seconds": round(prepare, 2) if prepare is not None else None,
        "transfer_seconds": round(active, 2) if active is not None else None,
        "resent": final.get("resent"), "identical": True, "cpu": cpu_delta(cpu0, cpu1),
        "peak_rss": {n: memory[n].get("VmHWM") for n in memory},
        "sampled_max_rss": {n: sampler.peak.get(f"{key}.{n}") for n in memory} if sampler else None,
        "threads": {n: memory[n].get("Threads") for n in memory},
        "chunk_parameters": chunk_parameters(size), "load_average": load,
        "note": "from the send command until it reports completed (the receiver has fsynced the file)",
    }
    log(f"  {elapsed:.2f} s; CPU {result['cpu']}; peak RSS {result['peak_rss']}")
    drop_file_cache(received)
    os.unlink(received)
    return result


def rsync_push(run, source, tag, fsync):
    """The same file (or tree) pushed to a fresh rsync daemon: plaintext, --whole-file for one
    file (no delta against nothing), with or without --fsync (rsync ≥ 3.2.4)."""
    daemon = RsyncDaemon(run, tag)
    try:
        extra = ["--whole-file"] + (["--fsync"] if fsync else [])
        start_cpu, daemon_before = os.times(), daemon.children_cpu()
        seconds, wire = daemon.push(source, extra)
        time.sleep(0.2)  # the daemon reaps the receiver it forked
        end_cpu, daemon_after = os.times(), daemon.children_cpu()
        # The client is our child; the receiving end is the daemon's (its children's CPU).
        cpu = round((end_cpu.children_user - start_cpu.children_user) + (end_cpu.children_system - start_cpu.children_system)
                    + daemon_after - daemon_before, 2)
        received = os.path.join(daemon.target, os.path.basename(source.rstrip("/")))
        if os.path.isfile(source):
            if not same_content(source, received):
                raise BenchError(f"{tag}: rsync's copy differs")
            drop_file_cache(received)
        return {"seconds": round(seconds, 2), "wire_bytes": wire, "fsync": fsync, "cpu_s": cpu,
                "note": "rsync daemon protocol on 127.0.0.1, plaintext" + (", --fsync" if fsync else ", no fsync")}
    finally:
        daemon.close()
        shutil.rmtree(daemon.root, ignore_errors=True)


def resume(run, source, timeout, clean_seconds=None):
    """bob SIGKILLed at ~50 % of a send and restarted on the same home and port."""
    size = os.path.getsize(source)
    group = SyncpeerGroup(run, "resume", 2)
    alice, inbox = group.alice, group.inbox["bob"]
    state = {"bob": group.nodes["bob"], "killed_at": None, "kill_time": None, "restarted": None, "error": None}
    lock = threading.Lock()
    start = time.monotonic()

    def restart():
        try:
            old = state["bob"]
            old.crash()
            state["kill_time"] = time.monotonic() - start
            new = SyncpeerDaemon(run, "bob", old.home, ["--receive-dir", inbox, "--auto-accept"], listen=old.address)
            state["bob"] = group.nodes["bob"] = new
            state["restarted"] = time.monotonic() - start
        except Exception as error:  # reported after the send returns or times out
            state["error"] = error

    def on_progress(event):
        with lock:
            if state["killed_at"] is None and event.get("state") == "active" and \
                    event.get("bytes", 0) >= event.get("total", size) // 2:
                state["killed_at"] = event.get("bytes")
                threading.Thread(target=restart, daemon=True).start()

    log(f"resume: sending {size / MiB:.0f} MiB; bob is SIGKILLed at 50 % and restarted")
    try:
        elapsed, final, events = send_file(group, source, on_progress=on_progress, timeout=timeout)
        if state["error"]:
            raise BenchError(f"resume: restarting bob failed: {state['error']}")
        if final.get("state") != "completed":
            raise BenchError(f"resume: final state {final.get('state')}: {final}")
        received = os.path.join(inbox, os.path.basename(source))
        if not same_content(source, received):
            raise BenchError("resume: the received file differs from the source")
        window = run.args.window or 16 * MiB
        resent = final.get("resent")
        moving = next((t for t, e in events if state["kill_time"] is not None and t > state["kill_time"]
                       and e.get("state") == "active"), None)
        result = {
            "bytes": size, "seconds": round(elapsed, 2), "killed_at_bytes": state["killed_at"],
            "killed_at_seconds": round(state["kill_time"], 2) if state["kill_time"] else None,
            "bob_restarted_at_seconds": round(state["restarted"], 2) if state["restarted"] else None,
            "stalled_seconds": round(moving - state["kill_time"], 2) if moving is not None else None,
            "ratio_to_clean_send": round(elapsed / clean_seconds, 2) if clean_seconds else None,
            "resent": resent, "window_bytes": window, "resent_within_window": resent is not None and resent <= window,
            "identical": True,
        }
        log(f"  {elapsed:.1f} s, re-sent {resent} bytes (window {window})")
        drop_file_cache(received)
        os.unlink(received)
        return result
    finally:
        group.close()
