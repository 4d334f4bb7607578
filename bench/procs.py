"""Processes we start (killed by PID on exit, never by name), and what /proc and ss say
about them: CPU seconds, resident memory, bytes through their TCP sockets."""
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

MB = 1_000_000
MiB = 1 << 20
GiB = 1 << 30
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(message):
    print(f"[bench] {message}", file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


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


def stop_process(proc, timeout=15):
    """SIGTERM, then SIGKILL after `timeout` seconds; by PID."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def proc_status(pid):
    """VmHWM, VmRSS (bytes) and Threads of a process."""
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


def cpu_delta(before, after):
    """{name: {user_s, system_s}} between two {name: (user, system)} snapshots."""
    return {n: {"user_s": round(after[n][0] - before[n][0], 2), "system_s": round(after[n][1] - before[n][1], 2)}
            for n in before if before[n] and after.get(n)}


def cpu_total(cpu):
    return round(sum(c["user_s"] + c["system_s"] for c in (cpu or {}).values()), 2)


def load_average():
    return [round(x, 2) for x in os.getloadavg()]


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
            self.peak.pop(name, None)

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


def wait_until(what, timeout, condition, interval=0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise BenchError(f"not reached within {timeout} s: {what}")
        time.sleep(interval)


def wait_for_arrival(what, timeout, arrived, interval=0.1):
    """Waits until `arrived()` holds on the receiving side and returns when the check that
    succeeded started. Every tool puts a file in place by a rename once it is complete, so it
    was there by then: the check itself (comparing 1 GiB, or reading 10,000 files) is not part
    of any tool's figure. 0.1 s between checks, for every tool."""
    started = [None]

    def timed():
        started[0] = time.monotonic()
        return arrived()
    wait_until(what, timeout, timed, interval)
    return started[0]


_SS_BYTES = re.compile(r"bytes_sent:(\d+)")


def socket_bytes(pid, exclude_ports=()):
    """Bytes sent by the established TCP sockets of process `pid` (from the kernel's
    per-socket counters, `ss -tinp`), except those with a local port in `exclude_ports` (a
    REST port). No proxy sits in any tool's path: this is how the bytes on the wire are
    counted. None when ss cannot say."""
    ss = shutil.which("ss")
    if not ss:
        return None
    out = subprocess.run([ss, "-tinpH", "state", "established"], capture_output=True, text=True).stdout
    total, owner = 0, False
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith((" ", "\t")):
            owner = f"pid={pid}," in line
            fields = line.split()
            local = fields[2] if len(fields) > 3 else ""
            if owner and local.rpartition(":")[2].isdigit() and int(local.rpartition(":")[2]) in exclude_ports:
                owner = False
            continue
        if owner:
            for value in _SS_BYTES.findall(line):
                total += int(value)
    return total
