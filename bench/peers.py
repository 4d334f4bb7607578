"""syncpeer under test: one run's context, daemons, and groups of paired nodes. Every process
listens on 127.0.0.1 only and is killed by PID; no proxy sits in any path (bytes on the wire
come from the kernel's socket counters). The anchors (Syncthing, rsync) are in anchors.py."""
import json
import os
import secrets
import signal
import subprocess
import threading
import time

from .files import spread_directories
from .procs import BenchError, log, proc_cpu, proc_status, socket_bytes, stop_process, track, wait_until

NAMES = ("alice", "bob", "carol", "dave")


def reset_peak(pid):
    """Resets a process's VmHWM (peak RSS) to its current RSS, so each workload reports its
    own peak (`echo 5 > /proc/PID/clear_refs`; needs the process's owner or root)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


class Run:
    """One benchmark run: options, its temporary directory, the environment of every tool."""

    def __init__(self, args, work):
        self.args = args
        self.syncpeer = args.syncpeer
        self.work = work
        # Each tree of the run in block groups no one freed inodes in lately (files.spread_directories).
        self.token = secrets.token_hex(3)
        self.spread = spread_directories(work)
        self.daemon_logs = []
        self.env = {"PATH": "/usr/bin:/bin", "HOME": work,
                    "SYNCPEER_INTERFACE": "lo",     # discovery, where present, stays on loopback
                    "SYNCPEER_REDIAL_MS": "300"}    # reconnect quickly after a kill
        if getattr(args, "window", 0):
            self.env["SYNCPEER_SEND_WINDOW"] = str(args.window)

    def path(self, name, *parts):
        """`name` in the run's directory, after the run's token: ext4 places each directory made
        there in a block group chosen from a hash of its name (files.spread_directories), so the
        same names would land in the groups a run just before freed."""
        return os.path.join(self.work, f"{self.token}-{name}", *parts)

    def run_cli(self, *arguments, timeout=60):
        result = subprocess.run([self.syncpeer] + list(arguments), env=self.env, capture_output=True,
                                text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            raise BenchError(f"syncpeer {' '.join(arguments)} failed ({result.returncode}): {result.stderr.strip()}")
        return result.stdout


class SyncpeerDaemon:
    def __init__(self, run, name, home, arguments=(), listen="127.0.0.1:0", env=None):
        self.run, self.name, self.home = run, name, home
        self.events = []  # (monotonic time, event)
        self.cond = threading.Condition()
        self.log_path = run.path(f"{name}-daemon-{len(run.daemon_logs)}.log")
        run.daemon_logs.append(self.log_path)
        self.stderr = open(self.log_path + ".stderr", "wb")
        command = [run.syncpeer, "--home", home, "daemon", "--listen", listen, "--json", "--no-discovery",
                   *arguments]
        self.proc = track(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.stderr,
                                           stdin=subprocess.DEVNULL, env=env or run.env))
        self.pid = self.proc.pid
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.address = self.wait_for(lambda e: e.get("event") == "listening", 15, "listening")["address"]

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

    def cli(self, *arguments, timeout=60):
        return self.run.run_cli("--home", self.home, *arguments, timeout=timeout)

    def status(self, timeout=120):
        """The folders of `status --json` (every page)."""
        folders = []
        for line in self.cli("status", "--json", timeout=timeout).splitlines():
            try:
                page = json.loads(line)
            except ValueError:
                continue
            folders += page.get("folders", [])
        return folders

    def folder(self, path):
        for folder in self.status():
            if os.path.realpath(folder.get("path", "")) == os.path.realpath(path):
                return folder
        return None

    def memory(self):
        return proc_status(self.pid)

    def cpu(self):
        return proc_cpu(self.pid)

    def wire(self):
        return socket_bytes(self.pid)

    def stop(self):
        stop_process(self.proc)
        self.reader.join(timeout=5)
        self.stderr.close()

    def crash(self):
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait()
        self.reader.join(timeout=5)
        self.stderr.close()


class SyncpeerGroup:
    """Nodes named alice, bob, … all paired with each other; the others receive into
    inbox-NAME and accept offers and folders (`--auto-accept`). The watcher runs as users run
    it (its default 1 s gathering); workloads trigger a scan with `syncpeer rescan`."""
    tool = "syncpeer"

    def __init__(self, run, tag, nodes=2, sampler=None, arguments=(), env=None, by_certificate=False, alice_env=None):
        """`arguments` and `env`: every daemon's extra options and environment (`alice_env`:
        alice's instead); `by_certificate`: pair by certificate ID (through the daemons'
        `--relay`) instead of at the address."""
        self.run, self.tag = run, tag
        self.nodes = {}
        self.inbox = {}
        for name in NAMES[:nodes]:
            home = run.path(f"{tag}-{name}")
            run.run_cli("--home", home, "init", "--name", name)
            extra = tuple(arguments)
            if name != "alice":
                self.inbox[name] = run.path(f"{tag}-inbox-{name}")
                os.makedirs(self.inbox[name])
                extra += ("--receive-dir", self.inbox[name], "--auto-accept")
            self.nodes[name] = SyncpeerDaemon(run, name, home, extra, env=alice_env if name == "alice" and alice_env else env)
            if sampler:
                sampler.watch(f"{tag}.{name}", self.nodes[name].pid)
        names = list(self.nodes)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if by_certificate:
                    self.pair_by_certificate(self.nodes[a], self.nodes[b])
                else:
                    self.nodes[a].cli("pair", self.nodes[b].address, "--json")
                self.nodes[a].wait_connected(b)
                self.nodes[b].wait_connected(a)
        self.alice = self.nodes["alice"]
        self.source_dir = None

    @staticmethod
    def pair_by_certificate(a, b, timeout=30):
        """`a` pairs with `b` by its certificate ID (asked again while `b` has not joined the relay yet)."""
        certificate = json.loads(b.cli("id", "--json"))["certificateID"]
        deadline = time.monotonic() + timeout
        while True:
            try:
                return a.cli("pair", certificate, "--json")
            except BenchError as error:
                if "not there" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    @property
    def receivers(self):
        return [n for n in self.nodes if n != "alice"]

    def share(self, directory, timeout=600):
        """alice shares `directory` with every other node; returns once each has it in sync."""
        self.source_dir = directory
        withs = [x for n in self.receivers for x in ("--with", n)]
        self.alice.cli("share", directory, *withs)
        wait_until(f"{self.tag}: every receiver has the folder", timeout,
                   lambda: all(os.path.isdir(self.target_dir(n)) for n in self.receivers), interval=0.2)
        self.settle(timeout)

    def mesh(self, timeout=60):
        """Receivers share the folder with each other too (each joins with `accept FOLDER-ID`), so
        that they can fetch chunks from each other, not only from alice. True when every join
        was accepted."""
        names = self.receivers
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                self.nodes[a].cli("share", self.target_dir(a), "--with", b)

                def offer():
                    for line in self.nodes[b].cli("status", "--json").splitlines():
                        for o in json.loads(line).get("offers", []) if line.strip() else []:
                            if o.get("joins") and (o.get("peer") or {}).get("name") == a:
                                return o["folder"]
                    return None
                try:
                    folder = wait_until(f"{b} asked to join {a}'s folder", timeout, offer, interval=0.3)
                except BenchError as error:
                    log(f"  {error}: receivers fetch from alice only")
                    return False
                self.nodes[b].cli("accept", folder)
        self.settle()
        return True

    def target_dir(self, name):
        return os.path.join(self.inbox[name], os.path.basename(self.source_dir))

    def settle(self, timeout=300):
        """Alice idle with every peer at 100 % and its index received, and every receiver's own
        folder idle too (alice's view can be done before the receiver has applied everything)."""
        def settled():
            folder = self.alice.folder(self.source_dir)
            peers = (folder or {}).get("peers") or []
            # (an empty folder's index is never sent: nothing to wait for then)
            return folder and folder.get("state") == "idle" and len(peers) >= len(self.receivers) and all(
                p.get("percent") == 100 and (p.get("indexReceived") or not folder.get("files")) for p in peers) and all(
                (self.nodes[n].folder(self.target_dir(n)) or {}).get("state") == "idle" for n in self.receivers)
        wait_until(f"{self.tag}: alice idle, every peer in sync", timeout, settled, interval=0.3)

    def trigger(self, sub=None):
        """`syncpeer rescan DIR [PATH]` on alice: the same trigger as Syncthing's POST /rest/db/scan."""
        self.alice.cli("rescan", self.source_dir, *([sub] if sub else []))

    def pids(self):
        return {n: d.pid for n, d in self.nodes.items()}

    def close(self):
        for d in self.nodes.values():
            d.stop()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


