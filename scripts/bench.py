#!/usr/bin/env python3
"""`make bench`: syncpeer throughput, resume and memory on loopback, next to this machine's
own limits measured in the same run (issue 5, point 7).

Benchmark helper only (never part of the product). Runs release-built binaries:

  1. limits: raw loopback TCP copy (memory to memory, and file to file with sendfile),
     disk write + fsync, ChaCha20-Poly1305 / BLAKE2b / FastCDC (syncpeer-bench, through
     PeerCrypto and PeerFiles);
  2. a 1 GiB random file sent from alice to bob (two daemons on 127.0.0.1): wall time, MB/s;
  3. bob SIGKILLed at ~50 % of another 1 GiB transfer and restarted: total time, bytes re-sent;
  4. peak memory (VmHWM, and the sampled VmRSS maximum) of both daemons, for the 1 GiB file
     and for a 4 GiB one (the largest chunk sizes: any larger file uses the same);
  5. optionally rsync over loopback (an rsync daemon on 127.0.0.1), if rsync is installed;
  6. folder sync (issue 6): 10,000 files of 4 KiB shared from alice until all are on bob
     (sync_small); a 1 MiB in-place change in the middle of a synced 1 GiB file, time and
     bytes on the wire through a counting TCP proxy (sync_delta); the scan and index of
     100,000 small files (index_100k) and of 1,000,000 (index_1m, with the time of one
     `status --json` on the idle folder and the size of the index); peak memory of the
     daemons in each.

Everything listens on 127.0.0.1 only. Every process started here is killed by PID and
the temporary directory removed at the end, also on failure or Ctrl-C. Figures are
printed as a table and written as JSON (default .build/bench/results.json).
"""
import argparse
import fcntl
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

MB = 1_000_000
MiB = 1 << 20
GiB = 1 << 30


def log(message):
    print(f"[bench] {message}", file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


# ---------------------------------------------------------------------------------------
# Processes we start (killed by PID on exit, never by name)

STARTED = []


def track(proc):
    STARTED.append(proc)
    return proc


def kill_started():
    for proc in reversed(STARTED):
        if proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)


# ---------------------------------------------------------------------------------------
# /proc helpers

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmRSS", "Threads"):
                    parts = value.split()
                    out[key] = int(parts[0]) * 1024 if key != "Threads" else int(parts[0])
    except OSError:
        pass
    return out


def proc_cpu(pid):
    """User and system CPU seconds of a process (all its threads)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK
    except OSError:
        return None


class RSSSampler(threading.Thread):
    """Samples VmRSS of some PIDs every `interval` seconds; keeps the maximum per name."""

    def __init__(self, interval=0.05):
        super().__init__(daemon=True)
        self.interval = interval
        self.pids = {}
        self.peak = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def watch(self, name, pid):
        with self.lock:
            self.pids[name] = pid

    def run(self):
        while not self.stopping.is_set():
            with self.lock:
                items = list(self.pids.items())
            for name, pid in items:
                rss = proc_status(pid).get("VmRSS")
                if rss is not None:
                    with self.lock:
                        self.peak[name] = max(self.peak.get(name, 0), rss)
            self.stopping.wait(self.interval)

    def stop(self):
        self.stopping.set()
        self.join(timeout=2)


# ---------------------------------------------------------------------------------------
# Files

def write_random_file(path, size):
    block = 8 * MiB
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(block, left)
            f.write(os.urandom(n))
            left -= n
    os.utime(path, ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))


def quiet_disk():
    """Writes everything dirty to disk before a workload's clock starts (every tool, every
    folder workload). On two machines the receiver's disk holds none of the sender's files;
    here they share one, and the files a workload starts from (1 GiB, or 10,000 small ones),
    another tool's staging file or an earlier workload's copies were still in the page cache,
    dirty, for up to 30 s. A receiver's syncfs then wrote them inside its figure (measured,
    session 17: a 0.47 s syncfs at the end of A-share was the source file)."""
    os.sync()


def warm(path):
    """Reads a file once so it is in the page cache."""
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(8 * MiB)
        while f.readinto(buf):
            pass


def same_content(a, b):
    return subprocess.run(["cmp", "-s", a, b]).returncode == 0


def drop_file_cache(path):
    """Asks the kernel to drop a file's pages (so the next file does not evict ours)."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    except OSError:
        pass


class ChunkParams:
    """ChunkParameters.forFileSize (Sources/PeerFiles/Chunker.swift), for the report."""
    @staticmethod
    def for_size(size):
        guess = -(-size // 2000)
        average = 64 << 10
        while average < guess and average < 4 * MiB:
            average <<= 1
        return f"average {average // 1024} KiB, max {4 * average // 1024} KiB"


# ---------------------------------------------------------------------------------------
# 1. Limits

def _tcp_receiver(listener, sink_path, result_pipe):
    conn, _ = listener.accept()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * MiB)
    total = 0
    buf = bytearray(4 * MiB)
    view = memoryview(buf)
    out = open(sink_path, "wb", buffering=0) if sink_path else None
    while True:
        n = conn.recv_into(view)
        if n == 0:
            break
        if out is not None:
            out.write(view[:n])
        total += n
    if out is not None:
        out.close()
    conn.close()
    os.write(result_pipe, str(total).encode())
    os.close(result_pipe)


def tcp_copy(size, source_file=None, sink_path=None):
    """One loopback TCP copy of `size` bytes between two processes; returns seconds.
    Memory to memory by default; with `source_file`, the sender uses sendfile from it and
    the receiver writes to `sink_path` (no fsync)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # receiver
        os.close(read_end)
        try:
            _tcp_receiver(listener, sink_path, write_end)
        finally:
            os._exit(0)
    os.close(write_end)
    listener.close()
    try:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 * MiB)
        start = time.monotonic()
        if source_file:
            with open(source_file, "rb") as f:
                offset = 0
                while offset < size:
                    sent = os.sendfile(sock.fileno(), f.fileno(), offset, min(64 * MiB, size - offset))
                    if sent == 0:
                        break
                    offset += sent
        else:
            block = memoryview(os.urandom(4 * MiB))
            left = size
            while left > 0:
                n = min(len(block), left)
                sock.sendall(block[:n])
                left -= n
        sock.shutdown(socket.SHUT_WR)
        received = int(os.read(read_end, 64) or b"0")
        elapsed = time.monotonic() - start
        sock.close()
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    if received != size:
        raise BenchError(f"TCP copy: received {received} of {size} bytes")
    return elapsed


def best_of(runs, body):
    times = sorted(body() for _ in range(runs))
    return times[0], times[len(times) // 2]


def disk_write_fsync(path, size):
    block = bytes(8 * MiB)
    start = time.monotonic()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        left = size
        while left > 0:
            left -= os.write(fd, block[:min(len(block), left)])
        os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.monotonic() - start
    os.unlink(path)
    return elapsed


# ---------------------------------------------------------------------------------------
# syncpeer daemons

class Daemon:
    def __init__(self, bench, name, home, arguments=(), listen="127.0.0.1:0", env=None):
        self.bench = bench
        self.name = name
        self.home = home
        self.events = []  # (monotonic time, event)
        self.cond = threading.Condition()
        self.log_path = os.path.join(bench.work, f"{name}-daemon-{len(bench.daemon_logs)}.log")
        bench.daemon_logs.append(self.log_path)
        self.stderr = open(self.log_path + ".stderr", "wb")
        command = [bench.syncpeer, "--home", home, "daemon", "--listen", listen, "--json", "--no-discovery"] + list(arguments)
        self.proc = track(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.stderr,
                                           stdin=subprocess.DEVNULL, env=env or bench.env))
        self.pid = self.proc.pid
        self.started = time.monotonic()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        listening = self.wait_for(lambda e: e.get("event") == "listening", 15, "listening")
        self.address = listening["address"]

    def _read(self):
        with open(self.log_path, "wb") as out:
            for line in self.proc.stdout:
                out.write(line)
                out.flush()
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                with self.cond:
                    self.events.append((time.monotonic(), event))
                    self.cond.notify_all()

    def wait_for(self, match, timeout, what):
        deadline = time.monotonic() + timeout
        seen = 0
        with self.cond:
            while True:
                for _, event in self.events[seen:]:
                    if match(event):
                        return event
                seen = len(self.events)
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    break
                self.cond.wait(min(left, 0.2))
        raise BenchError(f"{self.name}: no '{what}' event within {timeout} s (log: {self.log_path})")

    def wait_connected(self, peer, timeout=20):
        return self.wait_for(lambda e: e.get("event") == "state" and e.get("state") == "connected"
                             and (e.get("peer") or {}).get("name") == peer, timeout, f"connected to {peer}")

    def memory(self):
        return proc_status(self.pid)

    def cpu(self):
        return proc_cpu(self.pid)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(timeout=5)
        self.stderr.close()

    def crash(self):
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait()
        self.reader.join(timeout=5)
        self.stderr.close()


class Bench:
    def __init__(self, args):
        self.args = args
        self.syncpeer = args.syncpeer
        self.work = tempfile.mkdtemp(prefix="syncpeer-bench-", dir=args.tmp)
        self.daemon_logs = []
        self.env = {
            "PATH": "/usr/bin:/bin",
            "HOME": self.work,
            "SYNCPEER_INTERFACE": "lo",       # discovery, where present, stays on loopback
            "SYNCPEER_REDIAL_MS": "300",      # reconnect quickly after the kill
        }
        if args.window:
            self.env["SYNCPEER_SEND_WINDOW"] = str(args.window)

    def run_cli(self, *arguments, timeout=60):
        result = subprocess.run([self.syncpeer] + list(arguments), env=self.env, capture_output=True,
                                text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            raise BenchError(f"syncpeer {' '.join(arguments)} failed ({result.returncode}): {result.stderr.strip()}")
        return result.stdout

    def pair(self, tag):
        """Two fresh homes; alice pairs with bob (who auto-accepts). Returns (alice, bob, inbox)."""
        alice_home = os.path.join(self.work, f"alice-{tag}")
        bob_home = os.path.join(self.work, f"bob-{tag}")
        inbox = os.path.join(self.work, f"inbox-{tag}")
        os.makedirs(inbox)
        self.run_cli("--home", alice_home, "init", "--name", "alice")
        self.run_cli("--home", bob_home, "init", "--name", "bob")
        alice = Daemon(self, "alice", alice_home)
        bob = Daemon(self, "bob", bob_home, ["--receive-dir", inbox, "--auto-accept"])
        self.run_cli("--home", alice_home, "pair", bob.address, "--json", timeout=60)
        alice.wait_connected("bob")
        bob.wait_connected("alice")
        return alice, bob, inbox

    def send(self, alice, path, on_progress=None, timeout=900):
        """Runs `syncpeer send PATH --to bob --json`; returns (seconds, final result, events)."""
        command = [self.syncpeer, "--home", alice.home, "send", path, "--to", "bob", "--json"]
        start = time.monotonic()
        proc = track(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      stdin=subprocess.DEVNULL, env=self.env, text=True))
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
                raise BenchError(f"send did not finish within {timeout} s (killed); last event: "
                                 f"{events[-1][1] if events else None}")
            raise BenchError(f"send failed ({proc.returncode}) after {elapsed:.1f} s: {stderr.strip()}")
        return elapsed, events[-1][1], events


def phase_times(events):
    """(seconds until the first byte was confirmed active, seconds of the active phase)."""
    first_active = next((t for t, e in events if e.get("state") == "active"), None)
    end = events[-1][0]
    return first_active, (end - first_active) if first_active is not None else None


# ---------------------------------------------------------------------------------------
# The run

def measure_limits(bench, results, source):
    size = bench.args.size
    limits = results["limits"]
    log("limit: loopback TCP copy, memory to memory (2 processes, 4 MiB buffers)")
    best, median = best_of(3, lambda: tcp_copy(size))
    limits["tcp_loopback"] = {"mb_s": round(size / MB / best, 1), "median_mb_s": round(size / MB / median, 1),
                              "bytes": size, "note": "Python sender/receiver, 4 MiB send/recv, best of 3"}
    log(f"  {size / MB / best:.0f} MB/s")
    log("limit: loopback TCP copy, file to file (sendfile from the page cache, write to disk, no fsync)")
    sink = os.path.join(bench.work, "tcp-sink.bin")

    def file_copy():
        t = tcp_copy(size, source_file=source, sink_path=sink)
        drop_file_cache(sink)
        os.unlink(sink)
        return t
    best, median = best_of(2, file_copy)
    limits["tcp_loopback_file"] = {"mb_s": round(size / MB / best, 1), "median_mb_s": round(size / MB / median, 1),
                                   "bytes": size, "note": "informational: includes page-cache writes on the receiver"}
    log(f"  {size / MB / best:.0f} MB/s")
    log("informational: disk write + fsync of 1 GiB (the receiver fsyncs before the rename)")
    best, median = best_of(2, lambda: disk_write_fsync(os.path.join(bench.work, "disk.bin"), size))
    limits["disk_write_fsync"] = {"mb_s": round(size / MB / best, 1), "median_mb_s": round(size / MB / median, 1),
                                  "bytes": size, "note": "informational, not part of the goal"}
    log(f"  {size / MB / best:.0f} MB/s")

    log("limits: ChaCha20-Poly1305 and BLAKE2b (syncpeer-bench crypto)")
    crypto = json.loads(subprocess.run([bench.args.bench_bin, "crypto", "--seconds", "1"], check=True,
                                       capture_output=True, text=True).stdout)
    limits["chacha20poly1305_seal"] = crypto["chacha20poly1305_seal"]
    limits["chacha20poly1305_open"] = crypto["chacha20poly1305_open"]
    limits["noise_encrypt_plus_decrypt"] = crypto.get("noise_encrypt_plus_decrypt")
    limits["blake2b"] = crypto["blake2b"]
    for key in ("aes256gcm_seal", "aes256gcm_open", "noise_chachapoly_encrypt_plus_decrypt", "sha256", "blake3",
                "sha256_4k", "blake3_4k"):
        if key in crypto:
            limits[key] = crypto[key]
    log("limits: FastCDC + BLAKE3 over the 1 GiB file (syncpeer-bench chunk)")
    chunk = json.loads(subprocess.run([bench.args.bench_bin, "chunk", source, "--runs", "2"], check=True,
                                      capture_output=True, text=True).stdout)
    limits["fastcdc_chunk_hash"] = chunk
    # The goal counts the three limits of issue 5 (TCP, ChaCha20-Poly1305, BLAKE2b).
    goal_limits = {
        "tcp_loopback": limits["tcp_loopback"]["mb_s"],
        "chacha20poly1305_seal": limits["chacha20poly1305_seal"]["mb_s"],
        "chacha20poly1305_open": limits["chacha20poly1305_open"]["mb_s"],
        "blake2b": limits["blake2b"]["mb_s"],
    }
    slowest = min(goal_limits, key=goal_limits.get)
    results["goal"] = {"slowest_limit": slowest, "slowest_limit_mb_s": goal_limits[slowest],
                       "throughput_goal_mb_s": round(goal_limits[slowest] / 2, 1),
                       "memory_goal_bytes": 100 * MiB}


def end_to_end(bench, results, source, sampler, size=None, key="end_to_end", memory_key="memory"):
    size = size or bench.args.size
    log(f"{key}: pairing two fresh daemons")
    alice, bob, inbox = bench.pair(key)
    sampler.watch(key + ".alice", alice.pid)
    sampler.watch(key + ".bob", bob.pid)
    cpu0 = {"alice": alice.cpu(), "bob": bob.cpu()}
    log(f"{key}: sending {size / MiB:.0f} MiB alice → bob")
    elapsed, final, events = bench.send(alice, source)
    cpu1 = {"alice": alice.cpu(), "bob": bob.cpu()}
    memory = {"alice": alice.memory(), "bob": bob.memory()}
    if final.get("state") != "completed":
        raise BenchError(f"end to end: final state {final.get('state')}: {final}")
    received = os.path.join(inbox, os.path.basename(source))
    identical = same_content(source, received)
    if not identical:
        raise BenchError("end to end: the received file differs from the source")
    prepare, active = phase_times(events)
    cpu = {}
    for name in ("alice", "bob"):
        if cpu0[name] and cpu1[name]:
            cpu[name] = {"user_s": round(cpu1[name][0] - cpu0[name][0], 2),
                         "system_s": round(cpu1[name][1] - cpu0[name][1], 2)}
    results[key] = {
        "bytes": size, "seconds": round(elapsed, 2), "mb_s": round(size / MB / elapsed, 1),
        "prepare_seconds": round(prepare, 2) if prepare is not None else None,
        "transfer_seconds": round(active, 2) if active is not None else None,
        "transfer_mb_s": round(size / MB / active, 1) if active else None,
        "resent": final.get("resent"), "identical": identical,
        "window_bytes": bench.args.window or 16 * MiB,
        "cpu": cpu, "page_cache": "warm (source written and read just before)",
    }
    results[memory_key] = {
        "bytes": size, "chunk_parameters": f"{ChunkParams.for_size(size)}",
        "alice_vmhwm": memory["alice"].get("VmHWM"), "bob_vmhwm": memory["bob"].get("VmHWM"),
        "alice_sampled_max_rss": sampler.peak.get(key + ".alice"), "bob_sampled_max_rss": sampler.peak.get(key + ".bob"),
        "alice_threads": memory["alice"].get("Threads"), "bob_threads": memory["bob"].get("Threads"),
    }
    log(f"  {elapsed:.1f} s, {size / MB / elapsed:.0f} MB/s; VmHWM alice {memory['alice'].get('VmHWM', 0) / MiB:.0f} MiB, "
        f"bob {memory['bob'].get('VmHWM', 0) / MiB:.0f} MiB")
    alice.stop()
    bob.stop()
    drop_file_cache(received)
    os.unlink(received)
    shutil.rmtree(inbox, ignore_errors=True)


def resume(bench, results, source):
    size = bench.args.size
    log("resume: pairing two fresh daemons")
    alice, bob, inbox = bench.pair("resume")
    state = {"bob": bob, "killed_at": None, "kill_time": None, "restarted": None, "error": None}
    lock = threading.Lock()
    start = time.monotonic()

    def restart():
        try:
            old = state["bob"]
            old.crash()
            state["kill_time"] = time.monotonic() - start
            # Same home, same port: alice redials the address she knows (so does bob).
            new = Daemon(bench, "bob", old.home, ["--receive-dir", inbox, "--auto-accept"], listen=old.address)
            state["bob"] = new
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
        elapsed, final, events = bench.send(alice, source, on_progress=on_progress, timeout=bench.args.resume_timeout)
    except BenchError as error:
        # Keep what is known (and both sides' view of the transfer) for the report.
        views = {}
        for name, daemon in (("alice", alice), ("bob", state["bob"])):
            try:
                views[name] = bench.run_cli("--home", daemon.home, "transfers", timeout=10).strip()
            except (BenchError, subprocess.TimeoutExpired) as other:
                views[name] = str(other)
        results["resume"] = {"bytes": size, "completed": False, "error": str(error),
                             "killed_at_bytes": state["killed_at"], "transfers": views,
                             "window_bytes": bench.args.window or 16 * MiB}
        raise
    if state["error"]:
        raise BenchError(f"resume: restarting bob failed: {state['error']}")
    if final.get("state") != "completed":
        raise BenchError(f"resume: final state {final.get('state')}: {final}")
    received = os.path.join(inbox, os.path.basename(source))
    identical = same_content(source, received)
    bob = state["bob"]
    bob_memory = bob.memory()
    window = bench.args.window or 16 * MiB
    resent = final.get("resent")
    # When bytes move again: the sender's first "active" after the kill (bob listening,
    # reconnected, his partial file checked, his accept received).
    moving = next((t for t, e in events if state["kill_time"] is not None and t > state["kill_time"]
                   and e.get("state") == "active"), None)
    clean = results.get("end_to_end", {}).get("seconds")
    results["resume"] = {
        "bytes": size, "seconds": round(elapsed, 2), "killed_at_bytes": state["killed_at"],
        "killed_at_seconds": round(state["kill_time"], 2) if state["kill_time"] else None,
        "bob_restarted_at_seconds": round(state["restarted"], 2) if state["restarted"] else None,
        "moving_again_at_seconds": round(moving, 2) if moving is not None else None,
        "stalled_seconds": round(moving - state["kill_time"], 2) if moving is not None else None,
        "ratio_to_clean_send": round(elapsed / clean, 2) if clean else None,
        "completed": True, "resent": resent, "window_bytes": window,
        "resent_within_window": resent is not None and resent <= window,
        "identical": identical, "restarted_bob_vmhwm": bob_memory.get("VmHWM"),
    }
    log(f"  {elapsed:.1f} s, re-sent {resent} bytes (window {window})")
    alice.stop()
    bob.stop()
    if not identical:
        raise BenchError("resume: the received file differs from the source")
    drop_file_cache(received)
    os.unlink(received)
    shutil.rmtree(inbox, ignore_errors=True)


def rsync_compare(bench, results, source):
    rsync = shutil.which("rsync")
    if not rsync:
        results["rsync"] = {"skipped": "rsync is not installed"}
        log("rsync: not installed, skipped")
        return
    root = os.path.join(bench.work, "rsync")
    target = os.path.join(root, "module")
    os.makedirs(target)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = os.path.join(root, "rsyncd.conf")
    with open(config, "w") as f:
        f.write(f"pid file = {root}/rsyncd.pid\nuse chroot = no\nuid = {os.getuid()}\ngid = {os.getgid()}\n"
                f"[bench]\n  path = {target}\n  read only = no\n")
    daemon = track(subprocess.Popen([rsync, "--daemon", "--no-detach", "--address=127.0.0.1", f"--port={port}",
                                     f"--config={config}", f"--log-file={root}/rsyncd.log"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise BenchError("rsync daemon did not start")
                time.sleep(0.05)
        log("rsync: sending the 1 GiB file to an rsync daemon on 127.0.0.1 (no encryption)")
        start = time.monotonic()
        subprocess.run([rsync, "-a", "--whole-file", source, f"rsync://127.0.0.1:{port}/bench/"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=bench.env)
        elapsed = time.monotonic() - start
        received = os.path.join(target, os.path.basename(source))
        version = subprocess.run([rsync, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
        results["rsync"] = {"seconds": round(elapsed, 2), "mb_s": round(bench.args.size / MB / elapsed, 1),
                            "identical": same_content(source, received), "version": version,
                            "note": "rsync daemon protocol, plaintext, no fsync"}
        log(f"  {elapsed:.1f} s, {bench.args.size / MB / elapsed:.0f} MB/s")
        drop_file_cache(received)
    finally:
        if daemon.poll() is None:
            os.kill(daemon.pid, signal.SIGTERM)
            try:
                daemon.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(daemon.pid, signal.SIGKILL)
                daemon.wait()


# ---------------------------------------------------------------------------------------
# Folder sync (issue 6): 10,000 small files, a 1 MiB change in a 1 GiB file, indexing 100,000

class CountingProxy:
    """A TCP relay on 127.0.0.1 that counts the bytes it carries in each direction. Alice
    pairs with bob through it, so every byte of their connection crosses it (checked: no
    other TCP connection between the two daemons' ports is open while we measure)."""

    def __init__(self, target_host, target_port):
        self.target = (target_host, target_port)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.up = 0      # dialer (alice) → target (bob)
        self.down = 0    # target (bob) → dialer (alice)
        self.connections = 0
        self.sockets = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.connections += 1
                self.sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, "up"), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, "down"), daemon=True).start()

    def _pump(self, source, sink, direction):
        # splice(2) through a pipe: the bytes stay in the kernel. A recv_into/sendall pump cost
        # two more copies of every byte, in a third process on the same two cores as the
        # peers it measures (so it slowed the proxied workloads, Syncthing's and ours).
        try:
            r, w = os.pipe()
        except OSError:
            return
        try:
            try:
                fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 * MiB)
            except OSError:
                pass
            flags = os.SPLICE_F_MOVE   # not SPLICE_F_MORE: it corks the socket (MSG_MORE) and delays small frames
            while True:
                n = os.splice(source.fileno(), w, 1 * MiB, flags=flags)
                if n == 0:
                    break
                moved = 0
                while moved < n:
                    moved += os.splice(r, sink.fileno(), n - moved, flags=flags)
                with self.lock:
                    setattr(self, direction, getattr(self, direction) + n)
        except OSError:
            pass
        finally:
            os.close(r)
            os.close(w)
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def counters(self):
        with self.lock:
            return self.up, self.down

    def close(self):
        self.closed = True
        self.listener.close()
        with self.lock:
            for s in self.sockets:
                try:
                    s.close()
                except OSError:
                    pass


    def own_ports(self):
        """Local ports of the proxy's sockets (its legs to the target)."""
        ports = {self.port}
        with self.lock:
            for s in self.sockets:
                try:
                    ports.add(s.getsockname()[1])
                except OSError:
                    pass
        return ports


def direct_connections(port_a, port_b, exclude=()):
    """Established TCP connections to or from the two daemons' listening ports other than the
    proxy's own legs (a dial-back from bob to alice, say); `ss` from iproute2, if present."""
    ss = shutil.which("ss")
    if not ss:
        return None
    out = subprocess.run([ss, "-Htn", "state", "established", f"( sport = :{port_a} or dport = :{port_a} "
                          f"or sport = :{port_b} or dport = :{port_b} )"], capture_output=True, text=True).stdout
    def ports(line):
        return {int(field.rpartition(":")[2]) for field in line.split()[2:4]}
    return [line for line in out.splitlines() if line.strip() and not ports(line) & set(exclude)]


FOLDER_ENV = {"SYNCPEER_WATCH_DELAY_MS": "200"}


def folder_pair(bench, tag, proxy=False):
    """Like Bench.pair, with the folder knobs; optionally alice dials bob through a counting
    proxy. Returns (alice, bob, receive folder of bob, proxy or None)."""
    env = dict(bench.env, **FOLDER_ENV)
    alice_home = os.path.join(bench.work, f"alice-{tag}")
    bob_home = os.path.join(bench.work, f"bob-{tag}")
    inbox = os.path.join(bench.work, f"inbox-{tag}")
    os.makedirs(inbox)
    bench.run_cli("--home", alice_home, "init", "--name", "alice")
    bench.run_cli("--home", bob_home, "init", "--name", "bob")
    alice = Daemon(bench, "alice", alice_home, env=env)
    bob = Daemon(bench, "bob", bob_home, ["--receive-dir", inbox, "--auto-accept"], env=env)
    relay = None
    address = bob.address
    if proxy:
        host, _, port = bob.address.rpartition(":")
        relay = CountingProxy(host, int(port))
        address = relay.address
    bench.run_cli("--home", alice_home, "pair", address, "--json", timeout=60)
    alice.wait_connected("bob")
    bob.wait_connected("alice")
    return alice, bob, inbox, relay


def folder_status(bench, daemon, path):
    out = json.loads(bench.run_cli("--home", daemon.home, "status", "--json", timeout=120))
    for folder in out.get("folders", []):
        if os.path.realpath(folder.get("path", "")) == os.path.realpath(path):
            return folder
    return None


def wait_until(what, timeout, condition, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise BenchError(f"not reached within {timeout} s: {what}")
        time.sleep(interval)


def wait_for_arrival(what, timeout, arrived, interval=0.05):
    """Waits until `arrived()` holds on the receiving side and returns when the check that
    succeeded started. Both tools put a file in place by a rename once it is complete, so it
    was there by then: the check itself (comparing 1 GiB, or reading 10,000 files) is not part
    of any tool's figure."""
    started = [None]

    def timed():
        started[0] = time.monotonic()
        return arrived()
    wait_until(what, timeout, timed, interval)
    return started[0]


def overwrite_in_place(path, data, offset):
    """C's change: `data` written over the file at `offset`, in place (no new inode)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)


def change_arrived(source, target, data, offset):
    """True once `target` holds `data` at `offset` and is byte for byte `source`."""
    try:
        with open(target, "rb") as f:
            f.seek(offset)
            if f.read(len(data)) != data:
                return False
    except OSError:
        return False
    return same_content(source, target)


def is_temp_name(name):
    return name.endswith(".syncpeer-tmp") or ".syncpeer-partial" in name


def is_own_name(name):
    """syncpeer's own files in a folder: temporaries and the root marker (.syncpeer-folder)."""
    return is_temp_name(name) or name.startswith(".syncpeer")


def set_aside(bench, path):
    """Moves a tree of many files out of the way instead of deleting it; the bench deletes
    them all at its end. On this machine's ext4 (no journal) the inode allocator skips
    every inode freed in the last 1-6 minutes (`recently_deleted`), one buffer lookup each:
    deleting the 20,000 files of one B run made the next 10,000 creates cost 1-2.5 s more
    system time (bob: sys 1.0-1.3 s when nothing was deleted before, 2.2-3.7 s after), so
    each tool's run would pay for the cleanup of the run before it."""
    if not os.path.lexists(path):
        return
    aside = os.path.join(bench.work, "set-aside")
    os.makedirs(aside, exist_ok=True)
    os.rename(path, os.path.join(aside, f"{len(os.listdir(aside)):03d}-{os.path.basename(path)}"))


def sync_small(bench, results, sampler, count=10_000, size=4096):
    log(f"sync_small: {count:,} files of {size} B on alice")
    alice, bob, inbox, _ = folder_pair(bench, "sync_small")
    sampler.watch("sync_small.alice", alice.pid)
    sampler.watch("sync_small.bob", bob.pid)
    shared = os.path.join(bench.work, "small-files")
    os.makedirs(shared)
    contents = {}
    for i in range(count):
        name = f"f{i:05d}.bin"
        data = os.urandom(size)
        contents[name] = data
        with open(os.path.join(shared, name), "wb") as f:
            f.write(data)
    target = os.path.join(inbox, os.path.basename(shared))

    def arrived():
        try:
            names = [e.name for e in os.scandir(target) if e.is_file(follow_symlinks=False) and not is_own_name(e.name)]
        except FileNotFoundError:
            return False
        state["seen"] = len(names)
        if len(names) != count:
            return False
        for name in names:  # every file, not a sample: 40 MB reads in well under a second
            with open(os.path.join(target, name), "rb") as f:
                if f.read() != contents.get(name):
                    return False
        return True

    state = {"seen": 0}
    quiet_disk()
    cpu0 = {"alice": alice.cpu(), "bob": bob.cpu()}
    log(f"sync_small: share with bob, wait until all {count:,} are on bob with the same content")
    start = time.monotonic()
    bench.run_cli("--home", alice.home, "share", shared, "--with", "bob")
    shared_at = time.monotonic() - start
    try:
        elapsed = wait_for_arrival(f"{count} files on bob", bench.args.folder_timeout, arrived) - start
    except BenchError as error:
        results["sync_small"] = {"files": count, "file_bytes": size, "error": str(error), "arrived": state["seen"]}
        raise
    cpu1 = {"alice": alice.cpu(), "bob": bob.cpu()}
    memory = {"alice": alice.memory(), "bob": bob.memory()}
    results["sync_small"] = {
        "files": count, "file_bytes": size, "seconds": round(elapsed, 2), "share_command_seconds": round(shared_at, 2),
        "files_per_s": round(count / elapsed), "goal_seconds": 1.5, "goal_met": elapsed <= 1.5,
        "identical": True, "checked": "all files, count and content",
        "alice_vmhwm": memory["alice"].get("VmHWM"), "bob_vmhwm": memory["bob"].get("VmHWM"),
        "alice_sampled_max_rss": sampler.peak.get("sync_small.alice"), "bob_sampled_max_rss": sampler.peak.get("sync_small.bob"),
        "cpu": {n: {"user_s": round(cpu1[n][0] - cpu0[n][0], 2), "system_s": round(cpu1[n][1] - cpu0[n][1], 2)}
                for n in ("alice", "bob") if cpu0[n] and cpu1[n]},
        "note": "from the share command to the last file verified on bob (poll every 50 ms); watch delay "
                f"{FOLDER_ENV['SYNCPEER_WATCH_DELAY_MS']} ms",
    }
    log(f"  {elapsed:.2f} s ({count / elapsed:,.0f} files/s); VmHWM alice {memory['alice'].get('VmHWM', 0) / MiB:.0f} MiB, "
        f"bob {memory['bob'].get('VmHWM', 0) / MiB:.0f} MiB")
    alice.stop()
    bob.stop()
    set_aside(bench, shared)
    set_aside(bench, inbox)


def sync_delta(bench, results, sampler, size=GiB, change=MiB):
    log(f"sync_delta: pairing alice and bob through a counting TCP proxy")
    alice, bob, inbox, relay = folder_pair(bench, "sync_delta", proxy=True)
    sampler.watch("sync_delta.alice", alice.pid)
    sampler.watch("sync_delta.bob", bob.pid)
    shared = os.path.join(bench.work, "delta-folder")
    os.makedirs(shared)
    source = os.path.join(shared, "big.bin")
    log(f"sync_delta: writing {size / MiB:.0f} MiB of random data, sharing it, first sync (not the figure)")
    write_random_file(source, size)
    target = os.path.join(inbox, os.path.basename(shared), "big.bin")
    start = time.monotonic()
    bench.run_cli("--home", alice.home, "share", shared, "--with", "bob")

    def first_done():
        try:
            return os.path.getsize(target) == size and same_content(source, target)
        except OSError:
            return False
    wait_until("the first sync of the big file", bench.args.folder_timeout, first_done, interval=0.5)
    first = time.monotonic() - start
    log(f"  first sync {first:.1f} s")

    def settled():  # both sides idle, bob 100 % in sync: no index traffic left to count
        a = folder_status(bench, alice, shared)
        return a and a.get("state") == "idle" and all(p.get("percent") == 100 and p.get("indexReceived")
                                                    for p in a.get("peers", [])) and a.get("peers")
    wait_until("alice idle and bob in sync", 120, settled, interval=0.5)
    time.sleep(1.0)
    up0, down0 = relay.counters()
    offset = size // 2 - change // 2
    new = os.urandom(change)
    log(f"sync_delta: overwriting {change / MiB:g} MiB at offset {offset:,} in place")
    quiet_disk()
    cpu0 = {"alice": alice.cpu(), "bob": bob.cpu()}
    t0 = time.monotonic()
    overwrite_in_place(source, new, offset)
    try:
        elapsed = wait_for_arrival("the change on bob", bench.args.folder_timeout,
                                   lambda: change_arrived(source, target, new, offset)) - t0
    except BenchError as error:
        results["sync_delta"] = {"bytes": size, "changed_bytes": change, "error": str(error)}
        raise
    checked = time.monotonic() - t0
    cpu1 = {"alice": alice.cpu(), "bob": bob.cpu()}
    up1, down1 = relay.counters()
    wait_until("alice idle and bob in sync after the change", 120, settled, interval=0.5)
    time.sleep(1.0)
    up2, down2 = relay.counters()
    bypass = direct_connections(int(alice.address.rpartition(":")[2]), int(bob.address.rpartition(":")[2]),
                                exclude=relay.own_ports())
    moved = (up2 - up0) + (down2 - down0)
    memory = {"alice": alice.memory(), "bob": bob.memory()}
    results["sync_delta"] = {
        "bytes": size, "changed_bytes": change, "changed_offset": offset, "seconds": round(elapsed, 2),
        "seconds_with_check": round(checked, 2), "cpu": cpu_delta(cpu0, cpu1),
        "first_sync_seconds": round(first, 1),
        "wire_bytes": moved, "wire_alice_to_bob": up2 - up0, "wire_bob_to_alice": down2 - down0,
        "wire_bytes_at_match": (up1 - up0) + (down1 - down0),
        "goal_wire_bytes": 4 * MiB, "goal_met": moved <= 4 * MiB,
        "proxy_connections": relay.connections,
        "connections_bypassing_proxy": len(bypass) if bypass is not None else None,
        "identical": True,
        "alice_vmhwm": memory["alice"].get("VmHWM"), "bob_vmhwm": memory["bob"].get("VmHWM"),
        "chunk_parameters": ChunkParams.for_size(size),
        "note": "bytes both ways over the TCP connection (encrypted frames, index update included) from the "
                "write until both sides are idle again; time from the write to the start of the check that found "
                "bob's file matching (cmp; seconds_with_check includes that check), "
                f"watch delay {FOLDER_ENV['SYNCPEER_WATCH_DELAY_MS']} ms included",
    }
    log(f"  {elapsed:.2f} s ({checked:.2f} s with the check); cpu {results['sync_delta']['cpu']}; on the wire {moved:,} B ({moved / MiB:.2f} MiB): alice→bob {up2 - up0:,}, "
        f"bob→alice {down2 - down0:,}; connections bypassing the proxy: {bypass if bypass is None else len(bypass)}")
    if bypass:
        raise BenchError(f"sync_delta: a connection bypasses the proxy, the byte count is not exact: {bypass}")
    alice.stop()
    bob.stop()
    relay.close()
    drop_file_cache(source)
    drop_file_cache(target)
    shutil.rmtree(shared, ignore_errors=True)
    shutil.rmtree(inbox, ignore_errors=True)


def make_small_files(root, count, dirs):
    """count files of 1–16 B (random bytes, nearly all different) in dirs folders under root;
    os.open/os.write/os.close relative to the folder's descriptor, which is several times
    faster than `with open` for a million files."""
    per_dir = count // dirs
    pool = os.urandom(per_dir * dirs * 16 + 16)
    d_width, f_width = max(3, len(str(dirs - 1))), max(4, len(str(per_dir - 1)))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for d in range(dirs):
        directory = os.path.join(root, f"d{d:0{d_width}d}")
        os.makedirs(directory)
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for i in range(per_dir):
                offset = (d * per_dir + i) * 16
                fd = os.open(f"f{i:0{f_width}d}.txt", flags, 0o644, dir_fd=dir_fd)
                os.write(fd, pool[offset:offset + 1 + (i * 7 + d) % 16])
                os.close(fd)
        finally:
            os.close(dir_fd)
    return per_dir * dirs


def index_db_bytes(home):
    """Sizes of alice's SQLite index: the database and its write-ahead log (if any)."""
    sizes = {}
    for suffix in ("", "-wal"):
        try:
            sizes["index_db" + suffix.replace("-", "_")] = os.path.getsize(os.path.join(home, "index.db" + suffix))
        except OSError:
            pass
    return sizes


def timed_status(bench, daemon, path):
    start = time.monotonic()
    folder = folder_status(bench, daemon, path)
    return folder, time.monotonic() - start


def index_files(bench, results, sampler, count, dirs, name, timeout=None, interval=0.25, rss_goal=None):
    """Scan and index of count small files in dirs folders, shared on alice with bob stopped
    (index_100k, index_1m): seconds until `status --json` shows the folder idle with every
    file, peak RSS, CPU, then the time of one `status --json` call on the idle folder and
    the size of alice's index.db."""
    timeout = timeout or bench.args.folder_timeout
    log(f"{name}: creating {count:,} files of 1–16 B in {dirs:,} folders")
    shared = os.path.join(bench.work, name.replace("_", "-"))
    created_at = time.monotonic()
    count = make_small_files(shared, count, dirs)
    create_seconds = time.monotonic() - created_at
    log(f"  created in {create_seconds:.1f} s")
    alice, bob, inbox, _ = folder_pair(bench, name)
    # Only alice's scan and index are measured: bob is stopped (the folder is offered to
    # him when he comes back), so no pull competes with the scan.
    bob.stop()
    sampler.watch(f"{name}.alice", alice.pid)
    before = alice.memory()
    log(f"{name}: share, poll `status --json` until idle with {count:,} files (timeout {timeout:.0f} s)")
    start = time.monotonic()
    bench.run_cli("--home", alice.home, "share", shared, "--with", "bob")
    shared_at = time.monotonic() - start
    state = {"last": None, "polls": 0, "slowest_poll": 0.0, "next_log": start + 30, "progress": []}

    def indexed():
        state["polls"] += 1
        folder, took = timed_status(bench, alice, shared)
        state["slowest_poll"] = max(state["slowest_poll"], took)
        state["last"] = folder and {k: folder.get(k) for k in ("state", "files", "error")}
        now = time.monotonic()
        if now >= state["next_log"]:  # progress of a long scan: files so far and alice's memory
            state["next_log"] = now + 30
            rss = alice.memory().get("VmRSS")
            state["progress"].append({"seconds": round(now - start), "files": (folder or {}).get("files"),
                                      "state": (folder or {}).get("state"), "alice_vmrss": rss})
            log(f"  {now - start:.0f} s: {(folder or {}).get('files')} files, {(folder or {}).get('state')}, "
                f"VmRSS alice {(rss or 0) / MiB:.0f} MiB, status call {took:.2f} s")
        return folder and folder.get("state") == "idle" and folder.get("files") == count
    try:
        wait_until(f"{count} files indexed", timeout, indexed, interval=interval)
    except BenchError as error:
        memory, cpu = alice.memory(), alice.cpu()
        results[name] = {"files": count, "error": str(error), "last_status": state["last"],
                         "progress": state["progress"], "alice_vmhwm": memory.get("VmHWM"),
                         "alice_vmrss": memory.get("VmRSS"), **index_db_bytes(alice.home),
                         "alice_cpu_total_s": round(cpu[0] + cpu[1], 2) if cpu else None}
        raise
    elapsed = time.monotonic() - start
    memory = alice.memory()
    cpu = alice.cpu()
    idle_calls = [round(timed_status(bench, alice, shared)[1], 3) for _ in range(3)]
    results[name] = {
        "files": count, "directories": dirs, "seconds": round(elapsed, 2), "share_command_seconds": round(shared_at, 2),
        "create_seconds": round(create_seconds, 1),
        "files_per_s": round(count / elapsed), "status_polls": state["polls"], "poll_interval_s": interval,
        "slowest_status_poll_s": round(state["slowest_poll"], 3),
        "status_call_seconds": idle_calls[0], "status_call_seconds_runs": idle_calls,
        "alice_vmhwm": memory.get("VmHWM"), "alice_vmrss_before": before.get("VmRSS"),
        "alice_sampled_max_rss": sampler.peak.get(f"{name}.alice"),
        "alice_cpu_total_s": round(cpu[0] + cpu[1], 2) if cpu else None,
        **index_db_bytes(alice.home), "progress": state["progress"], "rss_goal": rss_goal,
        "note": f"from the share command to `status --json` showing idle with every file (polled every {interval:g} s, "
                "after each status answer); bob offline; status_call_seconds: one `status --json` "
                "on the idle folder, the CLI's start included",
    }
    log(f"  {elapsed:.2f} s ({count / elapsed:,.0f} files/s); VmHWM alice {memory.get('VmHWM', 0) / MiB:.0f} MiB; "
        f"status on the idle folder {idle_calls[0]:.2f} s; index.db {results[name].get('index_db', 0) / MiB:.0f} MiB")
    alice.stop()
    shutil.rmtree(shared, ignore_errors=True)
    shutil.rmtree(inbox, ignore_errors=True)


def index_100k(bench, results, sampler):
    index_files(bench, results, sampler, count=100_000, dirs=100, name="index_100k", rss_goal=100 * MiB)


def index_1m(bench, results, sampler):
    # Syncthing folders of 1–5 million files are reported never to finish their scan: a
    # wait of its own (--index-1m-timeout), and status polled less often than for 100,000.
    index_files(bench, results, sampler, count=1_000_000, dirs=1000, name="index_1m",
                timeout=bench.args.index_1m_timeout, interval=1.0)


# ---------------------------------------------------------------------------------------
# Report

# ---------------------------------------------------------------------------------------
# A-share for syncpeer, and the same workloads with Syncthing (Debian's), interleaved

def cpu_delta(before, after):
    return {n: {"user_s": round(after[n][0] - before[n][0], 2), "system_s": round(after[n][1] - before[n][1], 2)}
            for n in before if before[n] and after.get(n)}


def sync_share(bench, results, sampler, size=GiB):
    """A-share: a new 1 GiB file in a folder alice shares with bob, from the share command until
    bob's copy is identical (through a counting proxy: bytes on the wire)."""
    log(f"sync_share: a new {size / MiB:.0f} MiB file in a shared folder, until bob has it")
    alice, bob, inbox, relay = folder_pair(bench, "sync_share", proxy=True)
    sampler.watch("sync_share.alice", alice.pid)
    sampler.watch("sync_share.bob", bob.pid)
    shared = os.path.join(bench.work, "share-folder")
    os.makedirs(shared)
    source = os.path.join(shared, "big.bin")
    write_random_file(source, size)
    warm(source)
    target = os.path.join(inbox, os.path.basename(shared), "big.bin")
    quiet_disk()
    cpu0 = {"alice": alice.cpu(), "bob": bob.cpu()}
    up0, down0 = relay.counters()
    start = time.monotonic()
    bench.run_cli("--home", alice.home, "share", shared, "--with", "bob")

    def done():
        try:
            return os.path.getsize(target) == size and same_content(source, target)
        except OSError:
            return False
    elapsed = wait_for_arrival("the shared file on bob", bench.args.folder_timeout, done) - start
    cpu1 = {"alice": alice.cpu(), "bob": bob.cpu()}
    up1, down1 = relay.counters()
    memory = {"alice": alice.memory(), "bob": bob.memory()}
    results["sync_share"] = {
        "bytes": size, "seconds": round(elapsed, 2), "mb_s": round(size / MB / elapsed, 1),
        "wire_bytes": (up1 - up0) + (down1 - down0), "cpu": cpu_delta(cpu0, cpu1),
        "alice_vmhwm": memory["alice"].get("VmHWM"), "bob_vmhwm": memory["bob"].get("VmHWM"),
        "note": "from `share` (the file already written) until the start of the check (cmp, polled every 50 ms) "
                "that found bob's copy identical",
    }
    log(f"  {elapsed:.2f} s; CPU {results['sync_share']['cpu']}")
    alice.stop()
    bob.stop()
    relay.close()
    drop_file_cache(source)
    drop_file_cache(target)
    shutil.rmtree(shared, ignore_errors=True)
    shutil.rmtree(inbox, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Syncthing:
    """One Syncthing instance, configured for the benchmark: listening on 127.0.0.1 only, no
    global or local discovery, no relays, NAT traversal, usage reporting, upgrades or crash
    reports, normal priority (it lowers its own by default), REST on 127.0.0.1 with an API key."""

    def __init__(self, bench, name):
        import secrets
        import xml.etree.ElementTree as ET
        self.bench = bench
        self.name = name
        self.home = os.path.join(bench.work, f"syncthing-{name}")
        self.port = free_port()
        self.gui_port = free_port()
        self.api_key = secrets.token_hex(16)
        # STMONITORED: run the worker directly (no monitor process in front of it), so that
        # the PID whose CPU and memory are read is the one that syncs.
        self.env = dict(bench.env, HOME=self.home, STNODEFAULTFOLDER="1", STNOUPGRADE="1", STMONITORED="1")
        subprocess.run(["syncthing", "generate", f"--home={self.home}", "--no-default-folder"], env=self.env,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.device_id = subprocess.run(["syncthing", "serve", f"--home={self.home}", "--device-id"], env=self.env,
                                        check=True, capture_output=True, text=True).stdout.strip()
        self.config_path = os.path.join(self.home, "config.xml")
        self.ET = ET
        self.tree = ET.parse(self.config_path)
        root = self.tree.getroot()
        for folder in root.findall("folder"):
            root.remove(folder)
        options = root.find("options")
        settings = {"listenAddress": f"tcp://127.0.0.1:{self.port}", "globalAnnounceEnabled": "false",
                    "localAnnounceEnabled": "false", "relaysEnabled": "false", "natEnabled": "false",
                    "urAccepted": "-1", "urSeen": "3", "autoUpgradeIntervalH": "0", "startBrowser": "false",
                    "crashReportingEnabled": "false", "setLowPriority": "false", "announceLANAddresses": "false"}
        for key, value in settings.items():
            for old in options.findall(key):
                options.remove(old)
            element = ET.SubElement(options, key)
            element.text = value
        gui = root.find("gui")
        gui.set("tls", "false")
        gui.find("address").text = f"127.0.0.1:{self.gui_port}"
        key = gui.find("apikey")
        if key is None:
            key = ET.SubElement(gui, "apikey")
        key.text = self.api_key
        self.proc = None

    def add_peer(self, other, address):
        device = self.ET.SubElement(self.tree.getroot(), "device", id=other.device_id, name=other.name,
                                    compression="metadata", introducer="false")
        self.ET.SubElement(device, "address").text = address

    def add_folder(self, folder_id, path, peers):
        folder = self.ET.SubElement(self.tree.getroot(), "folder", id=folder_id, label=folder_id, path=path,
                                    type="sendreceive", rescanIntervalS="3600", fsWatcherEnabled="true",
                                    fsWatcherDelayS="1")
        for device_id in [self.device_id] + [p.device_id for p in peers]:
            self.ET.SubElement(folder, "device", id=device_id)

    def start(self):
        self.tree.write(self.config_path)
        self.log = open(os.path.join(self.bench.work, f"syncthing-{self.name}.log"), "wb")
        self.bench.daemon_logs.append(self.log.name)
        self.proc = track(subprocess.Popen(["syncthing", "serve", f"--home={self.home}", "--no-browser", "--no-restart",
                                            "--logflags=0"], stdout=self.log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, env=self.env, start_new_session=True))
        self.pid = self.proc.pid
        wait_until(f"syncthing {self.name} REST up", 60, lambda: self.api("GET", "/rest/system/ping", quiet=True))

    def api(self, method, path, quiet=False):
        import urllib.request
        request = urllib.request.Request(f"http://127.0.0.1:{self.gui_port}{path}", method=method,
                                         headers={"X-API-Key": self.api_key})
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                body = reply.read()
                return json.loads(body) if body else {}
        except (OSError, ValueError):
            if quiet:
                return None
            raise

    def connected(self, other):
        reply = self.api("GET", "/rest/system/connections", quiet=True) or {}
        return (reply.get("connections", {}).get(other.device_id) or {}).get("connected")

    def idle(self, folder_id):
        reply = self.api("GET", f"/rest/db/status?folder={folder_id}", quiet=True) or {}
        return reply.get("state") == "idle"

    def scan(self, folder_id, sub=None):
        self.api("POST", f"/rest/db/scan?folder={folder_id}" + (f"&sub={sub}" if sub else ""))

    def cpu(self):
        return proc_cpu(self.pid)

    def memory(self):
        return proc_status(self.pid)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log.close()


class SyncthingPair:
    """Two Syncthing instances sharing one folder; alice dials bob through a counting proxy
    (bob does not dial back: its address for alice is `dynamic` and discovery is off)."""

    def __init__(self, bench, sampler):
        self.bench = bench
        self.alice = Syncthing(bench, "alice")
        self.bob = Syncthing(bench, "bob")
        self.relay = CountingProxy("127.0.0.1", self.bob.port)
        self.alice_dir = os.path.join(bench.work, "st-alice-folder")
        self.bob_dir = os.path.join(bench.work, "st-bob-folder")
        os.makedirs(self.alice_dir)
        os.makedirs(self.bob_dir)
        self.alice.add_peer(self.bob, f"tcp://127.0.0.1:{self.relay.port}")
        self.bob.add_peer(self.alice, "dynamic")
        self.alice.add_folder("bench", self.alice_dir, [self.bob])
        self.bob.add_folder("bench", self.bob_dir, [self.alice])
        self.alice.start()
        self.bob.start()
        sampler.watch("syncthing.alice", self.alice.pid)
        sampler.watch("syncthing.bob", self.bob.pid)
        wait_until("syncthing alice and bob connected", 60,
                   lambda: self.alice.connected(self.bob) and self.bob.connected(self.alice), interval=0.2)
        wait_until("syncthing folders idle", 60, lambda: self.alice.idle("bench") and self.bob.idle("bench"), interval=0.2)

    def run(self, what, change, arrived, sub=None, timeout=600):
        """Applies `change` on alice's side, asks alice to scan at once (no watcher delay), and
        returns the figures when `arrived()` holds on bob's side."""
        quiet_disk()
        cpu0 = {"alice": self.alice.cpu(), "bob": self.bob.cpu()}
        up0, down0 = self.relay.counters()
        start = time.monotonic()
        change()
        self.alice.scan("bench", sub)
        elapsed = wait_for_arrival(f"syncthing: {what}", timeout, arrived) - start
        cpu1 = {"alice": self.alice.cpu(), "bob": self.bob.cpu()}
        wait_until("syncthing idle again", 120, lambda: self.alice.idle("bench") and self.bob.idle("bench"), interval=0.2)
        time.sleep(1.0)
        up1, down1 = self.relay.counters()
        memory = {"alice": self.alice.memory(), "bob": self.bob.memory()}
        result = {"seconds": round(elapsed, 2), "wire_bytes": (up1 - up0) + (down1 - down0),
                  "cpu": cpu_delta(cpu0, cpu1),
                  "alice_vmhwm": memory["alice"].get("VmHWM"), "bob_vmhwm": memory["bob"].get("VmHWM")}
        log(f"  syncthing {what}: {elapsed:.2f} s, {result['wire_bytes'] / MiB:.2f} MiB on the wire, CPU {result['cpu']}")
        return result

    def close(self):
        self.alice.stop()
        self.bob.stop()
        self.relay.close()
        set_aside(self.bench, self.alice_dir)
        set_aside(self.bench, self.bob_dir)


def syncthing_version():
    out = subprocess.run(["syncthing", "--version"], capture_output=True, text=True).stdout.split()
    return out[1] if len(out) > 1 else None


def syncthing_a(pair, results, size=GiB):
    source = os.path.join(pair.alice_dir, "big.bin")
    target = os.path.join(pair.bob_dir, "big.bin")
    staging = os.path.join(pair.bench.work, "st-big.bin")
    write_random_file(staging, size)
    warm(staging)

    def arrived():
        try:
            return os.path.getsize(target) == size and same_content(source, target)
        except OSError:
            return False
    log(f"syncthing A: a new {size / MiB:.0f} MiB file in the shared folder")
    results["syncthing"]["a"] = pair.run("A, 1 GiB new file", lambda: os.rename(staging, source), arrived, sub="big.bin")
    results["syncthing"]["a"]["bytes"] = size


def syncthing_b(pair, results, count=10_000, size=4096):
    staging = os.path.join(pair.bench.work, "st-small")
    os.makedirs(staging)
    contents = {}
    for i in range(count):
        name = f"f{i:05d}.bin"
        contents[name] = os.urandom(size)
        with open(os.path.join(staging, name), "wb") as f:
            f.write(contents[name])
    target = os.path.join(pair.bob_dir, "small")

    def arrived():
        try:
            names = [e.name for e in os.scandir(target) if e.is_file(follow_symlinks=False) and not e.name.startswith(".syncthing.")]
        except FileNotFoundError:
            return False
        if len(names) != count:
            return False
        for name in names:
            with open(os.path.join(target, name), "rb") as f:
                if f.read() != contents.get(name):
                    return False
        return True
    log(f"syncthing B: {count:,} files of {size} B")
    results["syncthing"]["b"] = pair.run("B, 10,000 small files",
                                         lambda: os.rename(staging, os.path.join(pair.alice_dir, "small")), arrived, sub="small")


def syncthing_c(pair, results, size=GiB, change=MiB):
    source = os.path.join(pair.alice_dir, "big.bin")
    target = os.path.join(pair.bob_dir, "big.bin")
    offset = size // 2 - change // 2
    new = os.urandom(change)

    def write():
        overwrite_in_place(source, new, offset)

    def arrived():
        return change_arrived(source, target, new, offset)
    log(f"syncthing C: {change / MiB:g} MiB rewritten in the middle of the synced file")
    results["syncthing"]["c"] = pair.run("C, 1 MiB changed mid-file", write, arrived, sub="big.bin")


def rsync_daemon(bench):
    """A fresh rsync daemon on 127.0.0.1 (module directory under work/rsync-*); `push` sends
    to it and returns (seconds, bytes on the wire from --stats)."""
    rsync = shutil.which("rsync")
    root = tempfile.mkdtemp(prefix="rsync-", dir=bench.work)
    target = os.path.join(root, "module")
    os.makedirs(target)
    port = free_port()
    config = os.path.join(root, "rsyncd.conf")
    with open(config, "w") as f:
        f.write(f"pid file = {root}/rsyncd.pid\nuse chroot = no\nuid = {os.getuid()}\ngid = {os.getgid()}\n"
                f"[bench]\n  path = {target}\n  read only = no\n")
    daemon = track(subprocess.Popen([rsync, "--daemon", "--no-detach", "--address=127.0.0.1", f"--port={port}",
                                     f"--config={config}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return RsyncTarget(rsync, daemon, port, target, root)


class RsyncTarget:
    def __init__(self, rsync, daemon, port, target, root):
        self.rsync, self.daemon, self.port, self.target, self.root = rsync, daemon, port, target, root
        wait_until("rsync daemon up", 10, self._up)

    def _up(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def push(self, source, extra=()):
        start = time.monotonic()
        out = subprocess.run([self.rsync, "-a", "--stats", *extra, source, f"rsync://127.0.0.1:{self.port}/bench/"],
                             check=True, capture_output=True, text=True).stdout
        elapsed = time.monotonic() - start
        wire = 0
        for line in out.splitlines():
            if line.startswith("Total bytes sent:") or line.startswith("Total bytes received:"):
                wire += int(line.split(":")[1].strip().replace(",", ""))
        return elapsed, wire

    def close(self):
        if self.daemon.poll() is None:
            os.kill(self.daemon.pid, signal.SIGTERM)
            try:
                self.daemon.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(self.daemon.pid, signal.SIGKILL)
                self.daemon.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def rsync_small_and_delta(bench, results, size=GiB, count=10_000, file_size=4096, change=MiB):
    """rsync on workloads B (10,000 × 4 KiB) and C (1 MiB rewritten in the middle of a 1 GiB
    file the daemon already holds: rsync's delta algorithm), plaintext, no fsync."""
    if not shutil.which("rsync"):
        return
    small = os.path.join(bench.work, "rsync-small")
    os.makedirs(small)
    for i in range(count):
        with open(os.path.join(small, f"f{i:05d}.bin"), "wb") as f:
            f.write(os.urandom(file_size))
    target = rsync_daemon(bench)
    try:
        seconds, wire = target.push(small)
        results["rsync"]["b"] = {"seconds": round(seconds, 2), "wire_bytes": wire}
        log(f"  rsync B: {seconds:.2f} s")
        big = os.path.join(bench.work, "rsync-big.bin")
        write_random_file(big, size)
        target.push(big)
        offset = size // 2 - change // 2
        fd = os.open(big, os.O_WRONLY)
        try:
            os.pwrite(fd, os.urandom(change), offset)
        finally:
            os.close(fd)
        seconds, wire = target.push(big, extra=("--no-whole-file",))
        results["rsync"]["c"] = {"seconds": round(seconds, 2), "wire_bytes": wire,
                                 "identical": same_content(big, os.path.join(target.target, "rsync-big.bin"))}
        log(f"  rsync C: {seconds:.2f} s, {wire / MiB:.2f} MiB on the wire")
        drop_file_cache(big)
        os.unlink(big)
    finally:
        target.close()
        set_aside(bench, small)


def fmt_rate(x):
    return f"{x:,.0f} MB/s" if isinstance(x, (int, float)) else "—"


def fmt_mib(x):
    return f"{x / MiB:,.1f} MiB" if isinstance(x, (int, float)) else "—"


def versus(results, add):
    """Each workload side by side: syncpeer, Syncthing, rsync; seconds, ratios, bytes on the
    wire, CPU seconds of each side, peak RSS of each side."""
    st = results.get("syncthing") or {}
    rs = results.get("rsync") or {}

    def cpu_text(cpu):
        parts = [f"{n} {c['user_s'] + c['system_s']:.2f}" for n, c in (cpu or {}).items()]
        return "CPU-s " + " / ".join(parts) if parts else ""

    def rss_text(entry):
        if not entry or entry.get("alice_vmhwm") is None:
            return ""
        return f"peak RSS {fmt_mib(entry.get('alice_vmhwm'))} / {fmt_mib(entry.get('bob_vmhwm'))}"

    def ratio(ours, theirs):
        return f"{ours / theirs:.2f}" if ours and theirs else "—"

    e2e = results.get("end_to_end") or {}
    rows = [
        ("A-send, 1 GiB (send)", e2e, st.get("a"), rs if "seconds" in rs else None),
        ("A-share, 1 GiB new file", results.get("sync_share"), st.get("a"), rs if "seconds" in rs else None),
        ("B, 10,000 × 4 KiB", results.get("sync_small"), st.get("b"), rs.get("b")),
        ("C, 1 MiB changed in 1 GiB", results.get("sync_delta"), st.get("c"), rs.get("c")),
    ]
    if "version" in st:
        add("versus", f"Syncthing {st['version']}, rsync: same workloads, interleaved", "", "")
    for label, ours, theirs, plain in rows:
        if not ours or "seconds" not in ours:
            continue
        seconds = ours["seconds"]
        note = [f"÷ Syncthing {ratio(seconds, (theirs or {}).get('seconds'))}",
                f"÷ rsync {ratio(seconds, (plain or {}).get('seconds'))}"]
        if ours.get("wire_bytes") is not None:
            note.append(f"wire {fmt_mib(ours['wire_bytes'])}")
        note += [cpu_text(ours.get("cpu")), rss_text(ours) or rss_text(results.get("memory") if ours is e2e else None)]
        add("versus", f"{label}: syncpeer", f"{seconds} s", "; ".join(x for x in note if x))
        if theirs and "seconds" in theirs:
            add("versus", f"{label}: Syncthing", f"{theirs['seconds']} s",
                "; ".join(x for x in [f"wire {fmt_mib(theirs['wire_bytes'])}", cpu_text(theirs.get("cpu")), rss_text(theirs)] if x))
        if plain and "seconds" in plain:
            add("versus", f"{label}: rsync daemon", f"{plain['seconds']} s",
                "; ".join(x for x in [f"wire {fmt_mib(plain['wire_bytes'])}" if plain.get("wire_bytes") is not None else "",
                                      "plaintext, no fsync"] if x))


def table(results, size):
    rows = []
    size_label = f"{size / GiB:g} GiB" if size >= GiB else f"{size / MiB:g} MiB"
    limits = results.get("limits", {})
    goal = results.get("goal", {})

    def add(section, name, value, note=""):
        rows.append((section, name, value, note))

    def limit(key, label, note=""):
        if key in limits and limits[key]:
            add("limit", label, fmt_rate(limits[key]["mb_s"]), note)
    limit("tcp_loopback", "loopback TCP copy, memory→memory", "best of 3")
    limit("chacha20poly1305_seal", "ChaCha20-Poly1305 IETF seal, 64 KiB", "libsodium via PeerCrypto")
    limit("chacha20poly1305_open", "ChaCha20-Poly1305 IETF open, 64 KiB", "")
    limit("blake2b", "BLAKE2b-256, 1 MiB buffers", "libsodium (content hash before protocol 3)")
    limit("aes256gcm_seal", "AES-256-GCM seal, 64 KiB", "OpenSSL libcrypto via PeerCrypto")
    limit("aes256gcm_open", "AES-256-GCM open, 64 KiB", "")
    limit("sha256", "SHA-256, 1 MiB buffers", "OpenSSL libcrypto (content hash of protocol 3)")
    limit("blake3", "BLAKE3, 1 MiB buffers", "PeerCrypto, SIMD lanes: the content hash")
    limit("sha256_4k", "SHA-256, 4 KiB inputs", "")
    limit("blake3_4k", "BLAKE3, 4 KiB inputs", "a small file's one chunk")
    chunk = limits.get("fastcdc_chunk_hash") or {}
    for key, label in (("filechunker_threads2", "FastCDC chunk+hash (FileChunker, 2 thr)"),
                       ("filechunker_threads1", "FastCDC chunk+hash (FileChunker, 1 thr)"),
                       ("fastcdc_cut_only", "FastCDC cut only, in memory")):
        if key in chunk:
            add("limit", label, fmt_rate(chunk[key]["mb_s"]), f"{chunk.get('chunks', '?')} chunks" if key.endswith("2") else "")
    limit("noise_encrypt_plus_decrypt", "Noise transport seal+open, AESGCM (1 core)", "info: both ends' crypto on 1 core")
    limit("noise_chachapoly_encrypt_plus_decrypt", "Noise transport seal+open, ChaChaPoly (1 core)", "protocol version 1's cipher")
    limit("tcp_loopback_file", "loopback TCP copy, file→file", "info: sendfile, writes to disk cache")
    limit("disk_write_fsync", "disk write + fsync, same size", "info: receiver fsyncs the file")
    if goal:
        add("goal", "≥ 50 % of the slowest limit", fmt_rate(goal["throughput_goal_mb_s"]),
            f"slowest: {goal['slowest_limit']} {fmt_rate(goal['slowest_limit_mb_s'])}")
    e2e = results.get("end_to_end")
    if e2e:
        met = e2e["mb_s"] >= goal.get("throughput_goal_mb_s", float("inf"))
        add("e2e", f"{size_label} alice→bob, wall (send command)", fmt_rate(e2e["mb_s"]),
            f"{e2e['seconds']} s; goal {'MET' if met else 'NOT met'}")
        if e2e.get("transfer_mb_s"):
            add("e2e", "  of which: chunking the source", f"{e2e['prepare_seconds']} s", "before the offer")
            add("e2e", "  of which: transfer (accept→done)", fmt_rate(e2e["transfer_mb_s"]), f"{e2e['transfer_seconds']} s")
        for name in ("alice", "bob"):
            c = e2e.get("cpu", {}).get(name)
            if c:
                add("e2e", f"  CPU of {name}'s daemon", f"{c['user_s'] + c['system_s']:.1f} s",
                    f"user {c['user_s']} s, sys {c['system_s']} s")
    lg = results.get("large")
    if lg:
        add("large", f"{lg['bytes'] / GiB:g} GiB alice→bob (largest chunk sizes)", fmt_rate(lg["mb_s"]),
            f"{lg['seconds']} s; chunking {lg['prepare_seconds']} s")
    r = results.get("resume")
    if r and not r.get("completed"):
        add("resume", f"{size_label}, bob SIGKILLed at 50 %", "FAILED", r.get("error", "")[:100])
    elif r:
        add("resume", f"{size_label}, bob SIGKILLed at 50 %, total", f"{r['seconds']} s",
            f"killed at {fmt_mib(r['killed_at_bytes'])}, back at {r['bob_restarted_at_seconds']} s, "
            f"moving again {r.get('stalled_seconds')} s after the kill"
            + (f"; {r['ratio_to_clean_send']}× the clean send" if r.get("ratio_to_clean_send") else ""))
        add("resume", "bytes re-sent", f"{r['resent']:,} B" if r["resent"] is not None else "—",
            f"= {fmt_mib(r['resent'])}; window {fmt_mib(r['window_bytes'])}: "
            f"{'within' if r['resent_within_window'] else 'OVER'}")
    m = results.get("memory")
    if m:
        for name in ("alice", "bob"):
            hwm = m.get(f"{name}_vmhwm")
            ok = hwm is not None and hwm < 100 * MiB
            add("memory", f"{name} daemon peak RSS (VmHWM)", fmt_mib(hwm),
                f"sampled max {fmt_mib(m.get(name + '_sampled_max_rss'))}; goal < 100 MiB {'MET' if ok else 'NOT met'}")
    ml = results.get("memory_large")
    if ml:
        for name in ("alice", "bob"):
            hwm = ml.get(f"{name}_vmhwm")
            ok = hwm is not None and hwm < 100 * MiB
            add("memory", f"{name} peak RSS, {ml['bytes'] / GiB:g} GiB file", fmt_mib(hwm),
                f"{ml['chunk_parameters']}; goal < 100 MiB {'MET' if ok else 'NOT met'}")
    ss = results.get("sync_small")
    if ss and "seconds" not in ss:
        add("folder", f"{ss['files']:,} × {ss['file_bytes'] // 1024} KiB alice→bob", "FAILED", ss.get("error", "")[:100])
    elif ss:
        add("folder", f"{ss['files']:,} × {ss['file_bytes'] // 1024} KiB files alice→bob", f"{ss['seconds']} s",
            f"{ss['files_per_s']:,} files/s; goal ≤ {ss['goal_seconds']} s {'MET' if ss['goal_met'] else 'NOT met'}")
        add("folder", "  peak RSS alice / bob (VmHWM)", f"{fmt_mib(ss['alice_vmhwm'])} / {fmt_mib(ss['bob_vmhwm'])}",
            "goal < 100 MiB " + ("MET" if max(ss["alice_vmhwm"] or 0, ss["bob_vmhwm"] or 0) < 100 * MiB else "NOT met"))
    sd = results.get("sync_delta")
    if sd and "seconds" not in sd:
        add("folder", "1 MiB changed in a synced 1 GiB file", "FAILED", sd.get("error", "")[:100])
    elif sd:
        label = f"{sd['changed_bytes'] / MiB:g} MiB changed mid-file, {sd['bytes'] / GiB:g} GiB"
        add("folder", f"{label}: on the wire", fmt_mib(sd["wire_bytes"]),
            f"both ways, via proxy; goal ≤ {fmt_mib(sd['goal_wire_bytes'])} {'MET' if sd['goal_met'] else 'NOT met'}")
        add("folder", f"{label}: until bob matches", f"{sd['seconds']} s",
            f"watch delay included; first sync {sd['first_sync_seconds']} s")
        add("folder", "  peak RSS alice / bob (VmHWM)", f"{fmt_mib(sd['alice_vmhwm'])} / {fmt_mib(sd['bob_vmhwm'])}",
            "whole run incl. the first 1 GiB sync")
    for key in ("index_100k", "index_1m"):
        ix = results.get(key)
        if ix and "seconds" not in ix:
            add("folder", f"index {ix['files']:,} files", "FAILED", ix.get("error", "")[:100])
        elif ix:
            add("folder", f"scan + index {ix['files']:,} files (alice)", f"{ix['seconds']} s",
                f"{ix['files_per_s']:,} files/s; status polled every {ix['poll_interval_s']:g} s")
            goal = ix.get("rss_goal")
            add("folder", "  peak RSS alice (VmHWM)", fmt_mib(ix["alice_vmhwm"]),
                f"goal < {fmt_mib(goal)} " + ("MET" if (ix["alice_vmhwm"] or 0) < goal else "NOT met") if goal else "")
            add("folder", "  `status --json` on the idle folder", f"{ix['status_call_seconds']} s",
                f"CLI start included; slowest poll during the scan {ix['slowest_status_poll_s']} s")
            add("folder", "  alice's index.db", fmt_mib(ix.get("index_db")),
                f"WAL {fmt_mib(ix['index_db_wal'])}" if ix.get("index_db_wal") else "")
    rs = results.get("rsync")
    if rs:
        if "skipped" in rs:
            add("rsync", "rsync daemon over loopback", "skipped", rs["skipped"])
        else:
            add("rsync", f"rsync daemon over loopback, {size_label}", fmt_rate(rs["mb_s"]), f"{rs['seconds']} s, plaintext")
    versus(results, add)
    w = [max(len(str(row[i])) for row in rows) for i in range(4)]
    lines = [f"{'section':<{w[0]}}  {'measure':<{w[1]}}  {'value':>{w[2]}}  note",
             f"{'-' * w[0]}  {'-' * w[1]}  {'-' * w[2]}  {'-' * 4}"]
    for s, n, v, note in rows:
        lines.append(f"{s:<{w[0]}}  {n:<{w[1]}}  {v:>{w[2]}}  {note}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--syncpeer", required=True, help="the release-built syncpeer binary")
    parser.add_argument("--bench-bin", required=True, help="the release-built syncpeer-bench binary")
    parser.add_argument("--size", type=int, default=GiB, help="file size in bytes (default 1 GiB)")
    parser.add_argument("--window", type=int, default=0, help="SYNCPEER_SEND_WINDOW for the daemons (default: theirs, 16 MiB)")
    parser.add_argument("--large-size", type=int, default=4 * GiB,
                        help="size of the memory run with the largest chunk sizes (default 4 GiB; 0 skips it)")
    parser.add_argument("--resume-timeout", type=float, default=180, help="seconds the resume run may take (default 180)")
    parser.add_argument("--tmp", default="/tmp", help="where the temporary directory goes (same disk as the files)")
    parser.add_argument("--output", default=".build/bench/results.json")
    parser.add_argument("--skip", action="append", default=[], help="(repeatable) ""comma-separated phases to skip: limits,e2e,rsync,large,resume,"
                        "sync_share,sync_small,sync_delta,syncthing,index_100k,index_1m")
    parser.add_argument("--folder-timeout", type=float, default=300, help="seconds each folder-sync wait may take (default 300)")
    parser.add_argument("--index-1m-timeout", type=float, default=900,
                        help="seconds the index_1m wait may take (default 900)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs) for inspection")
    args = parser.parse_args()
    skip = {name for value in args.skip for name in value.split(",") if name}

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    results = {
        "machine": {"cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
                    "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "load_average_start": os.getloadavg(),
                    "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                             text=True).stdout.strip() or None},
        "limits": {},
    }
    bench = Bench(args)
    sampler = RSSSampler()
    sampler.start()
    status = 0
    try:
        log(f"working in {bench.work}")
        source = os.path.join(bench.work, "big.bin")
        if not {"limits", "e2e", "rsync", "large", "resume"} <= skip:
            log(f"writing {args.size / MiB:.0f} MiB of random data")
            write_random_file(source, args.size)
            warm(source)
        if "limits" not in skip:
            measure_limits(bench, results, source)
        if "e2e" not in skip:
            warm(source)
            end_to_end(bench, results, source, sampler)
        if "rsync" not in skip:
            warm(source)
            rsync_compare(bench, results, source)
        if "large" not in skip and args.large_size > 0:
            # Chunk sizes stop growing at 4 GiB (average 4 MiB, max 16 MiB), so the buffers,
            # and the peak memory, of any larger file are those of this one.
            drop_file_cache(source)
            os.unlink(source)
            source = os.path.join(bench.work, "large.bin")
            log(f"writing {args.large_size / MiB:.0f} MiB of random data")
            write_random_file(source, args.large_size)
            end_to_end(bench, results, source, sampler, size=args.large_size, key="large", memory_key="memory_large")
        if "resume" not in skip:
            # Other content, so nothing of the first transfer can be reused.
            drop_file_cache(source)
            os.unlink(source)
            source = os.path.join(bench.work, "resume.bin")
            write_random_file(source, args.size)
            warm(source)
            resume(bench, results, source)
        if os.path.exists(source):
            drop_file_cache(source)
            os.unlink(source)
        # Workloads A-share, B and C, each run by syncpeer and then by Syncthing (and rsync),
        # interleaved, so that both see the same load on this shared machine.
        pair = None
        if "syncthing" not in skip:
            if shutil.which("syncthing"):
                results["syncthing"] = {"version": syncthing_version()}
                pair = SyncthingPair(bench, sampler)
            else:
                results["syncthing"] = {"skipped": "syncthing is not installed"}
        try:
            if "sync_share" not in skip:
                sync_share(bench, results, sampler, size=args.size)
            if pair:
                syncthing_a(pair, results, size=args.size)
            if "sync_small" not in skip:
                sync_small(bench, results, sampler)
            if pair:
                syncthing_b(pair, results)
            if "sync_delta" not in skip:
                sync_delta(bench, results, sampler, size=args.size)
            if pair:
                syncthing_c(pair, results, size=args.size)
        finally:
            if pair:
                pair.close()
        if "rsync" not in skip and "rsync" in results and "skipped" not in results["rsync"]:
            rsync_small_and_delta(bench, results, size=args.size)
        if "index_100k" not in skip:
            index_100k(bench, results, sampler)
        if "index_1m" not in skip:
            index_1m(bench, results, sampler)
    except (BenchError, subprocess.CalledProcessError, subprocess.TimeoutExpired, KeyboardInterrupt, SystemExit) as error:
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            error = f"interrupted ({type(error).__name__} {error})"
        log(f"FAILED: {error}")
        results["error"] = str(error)
        status = 1
        for path in bench.daemon_logs:
            for p in (path, path + ".stderr"):
                try:
                    with open(p) as f:
                        tail = f.read()[-2000:]
                    if tail.strip():
                        log(f"--- {p} (end) ---\n{tail}")
                except OSError:
                    pass
    finally:
        sampler.stop()
        kill_started()
        if args.keep:
            log(f"kept {bench.work}")
        else:
            shutil.rmtree(bench.work, ignore_errors=True)
    results["machine"]["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results["machine"]["load_average_end"] = os.getloadavg()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(results, f, indent=2, sort_keys=True)
        f.write("\n")
    print()
    load = results["machine"]["load_average_start"]
    print(f"syncpeer benchmark, {results['machine']['cpus']} CPUs, loopback, {args.size / MiB:.0f} MiB files; "
          f"load average at start {load[0]:.2f} (other processes compete for the CPUs: figures vary run to run)")
    print(table(results, args.size))
    print(f"\nJSON: {args.output}")
    return status


if __name__ == "__main__":
    sys.exit(main())
