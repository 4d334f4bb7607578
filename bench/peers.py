"""The tools under test, each run the way its users run it: syncpeer daemons, Syncthing
instances (Debian's), an rsync daemon. Every process listens on 127.0.0.1 only and is killed
by PID; no proxy sits in any path (bytes on the wire come from the kernel's socket counters)."""
import json
import os
import signal
import subprocess
import threading
import time

from .procs import CLK_TCK, BenchError, log, proc_cpu, proc_status, socket_bytes, stop_process, track, wait_until

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
        self.daemon_logs = []
        self.env = {"PATH": "/usr/bin:/bin", "HOME": work,
                    "SYNCPEER_INTERFACE": "lo",     # discovery, where present, stays on loopback
                    "SYNCPEER_REDIAL_MS": "300"}    # reconnect quickly after a kill
        if getattr(args, "window", 0):
            self.env["SYNCPEER_SEND_WINDOW"] = str(args.window)

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def run_cli(self, *arguments, timeout=60):
        result = subprocess.run([self.syncpeer] + list(arguments), env=self.env, capture_output=True,
                                text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            raise BenchError(f"syncpeer {' '.join(arguments)} failed ({result.returncode}): {result.stderr.strip()}")
        return result.stdout


class SyncpeerDaemon:
    def __init__(self, run, name, home, arguments=(), listen="127.0.0.1:0"):
        self.run, self.name, self.home = run, name, home
        self.events = []  # (monotonic time, event)
        self.cond = threading.Condition()
        self.log_path = run.path(f"{name}-daemon-{len(run.daemon_logs)}.log")
        run.daemon_logs.append(self.log_path)
        self.stderr = open(self.log_path + ".stderr", "wb")
        command = [run.syncpeer, "--home", home, "daemon", "--listen", listen, "--json", "--no-discovery",
                   *arguments]
        self.proc = track(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.stderr,
                                           stdin=subprocess.DEVNULL, env=run.env))
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

    def __init__(self, run, tag, nodes=2, sampler=None):
        self.run, self.tag = run, tag
        self.nodes = {}
        self.inbox = {}
        for name in NAMES[:nodes]:
            home = run.path(f"{tag}-{name}")
            run.run_cli("--home", home, "init", "--name", name)
            arguments = ()
            if name != "alice":
                self.inbox[name] = run.path(f"{tag}-inbox-{name}")
                os.makedirs(self.inbox[name])
                arguments = ("--receive-dir", self.inbox[name], "--auto-accept")
            self.nodes[name] = SyncpeerDaemon(run, name, home, arguments)
            if sampler:
                sampler.watch(f"{tag}.{name}", self.nodes[name].pid)
        names = list(self.nodes)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                self.nodes[a].cli("pair", self.nodes[b].address, "--json")
                self.nodes[a].wait_connected(b)
                self.nodes[b].wait_connected(a)
        self.alice = self.nodes["alice"]
        self.source_dir = None

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
        """Alice idle with every peer at 100 % and its index received: nothing left in flight."""
        def settled():
            folder = self.alice.folder(self.source_dir)
            peers = (folder or {}).get("peers") or []
            # (an empty folder's index is never sent: nothing to wait for then)
            return folder and folder.get("state") == "idle" and len(peers) >= len(self.receivers) and all(
                p.get("percent") == 100 and (p.get("indexReceived") or not folder.get("files")) for p in peers)
        wait_until(f"{self.tag}: alice idle, every peer in sync", timeout, settled, interval=0.3)

    def trigger(self, sub=None):
        """`syncpeer rescan DIR [PATH]` on alice: the same trigger as Syncthing's POST /rest/db/scan."""
        self.alice.cli("rescan", self.source_dir, *([sub] if sub else []))

    def pids(self):
        return {n: d.pid for n, d in self.nodes.items()}

    def close(self):
        for d in self.nodes.values():
            d.stop()


class SyncthingNode:
    """One Syncthing instance as its users run it on Linux (defaults: fsync on, case checks
    on, its own TLS), listening on 127.0.0.1 only: no global or local discovery, relays, NAT
    traversal, usage reporting, upgrades or crash reports, normal priority, REST on
    127.0.0.1 with an API key. STMONITORED: no monitor process, so the PID measured syncs."""

    def __init__(self, run, name, tag):
        import secrets
        import xml.etree.ElementTree as ET
        self.run, self.name, self.ET = run, name, ET
        self.home = run.path(f"{tag}-syncthing-{name}")
        self.port = free_port()
        self.gui_port = free_port()
        self.api_key = secrets.token_hex(16)
        self.env = dict(run.env, HOME=self.home, STNODEFAULTFOLDER="1", STNOUPGRADE="1", STMONITORED="1")
        subprocess.run(["syncthing", "generate", f"--home={self.home}", "--no-default-folder"], env=self.env,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.device_id = subprocess.run(["syncthing", "serve", f"--home={self.home}", "--device-id"], env=self.env,
                                        check=True, capture_output=True, text=True).stdout.strip()
        self.config_path = os.path.join(self.home, "config.xml")
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
            ET.SubElement(options, key).text = value
        gui = root.find("gui")
        gui.set("tls", "false")
        gui.find("address").text = f"127.0.0.1:{self.gui_port}"
        key = gui.find("apikey")
        if key is None:
            key = ET.SubElement(gui, "apikey")
        key.text = self.api_key
        self.proc = None

    def add_peer(self, other):
        device = self.ET.SubElement(self.tree.getroot(), "device", id=other.device_id, name=other.name,
                                    compression="metadata", introducer="false")
        self.ET.SubElement(device, "address").text = f"tcp://127.0.0.1:{other.port}"

    def add_folder(self, folder_id, path, peers, case_sensitive=False):
        # As its own integration tests configure it (test/h1/config.xml): watcher off, scans
        # asked for explicitly; the watcher is switched on for the rows measured from the write.
        folder = self.ET.SubElement(self.tree.getroot(), "folder", id=folder_id, label=folder_id, path=path,
                                    type="sendreceive", rescanIntervalS="3600", fsWatcherEnabled="false",
                                    fsWatcherDelayS="1")
        for device_id in [self.device_id] + [p.device_id for p in peers]:
            self.ET.SubElement(folder, "device", id=device_id)
        self.ET.SubElement(folder, "caseSensitiveFS").text = "true" if case_sensitive else "false"

    def start(self):
        self.tree.write(self.config_path)
        self.log = open(self.home + ".log", "wb")
        self.run.daemon_logs.append(self.log.name)
        self.proc = track(subprocess.Popen(["syncthing", "serve", f"--home={self.home}", "--no-browser", "--no-restart",
                                            "--logflags=0"], stdout=self.log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, env=self.env, start_new_session=True))
        self.pid = self.proc.pid
        wait_until(f"syncthing {self.name} REST up", 60, lambda: self.api("GET", "/rest/system/ping", quiet=True))

    def api(self, method, path, body=None, quiet=False):
        import urllib.request
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.gui_port}{path}", method=method, data=data,
                                         headers={"X-API-Key": self.api_key, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                text = reply.read()
                return json.loads(text) if text else {}
        except (OSError, ValueError):
            if quiet:
                return None
            raise

    def connected(self, other):
        reply = self.api("GET", "/rest/system/connections", quiet=True) or {}
        return (reply.get("connections", {}).get(other.device_id) or {}).get("connected")

    def idle(self, folder_id):
        reply = self.api("GET", f"/rest/db/status?folder={folder_id}", quiet=True) or {}
        return reply.get("state") == "idle" and reply.get("needTotalItems", 0) == 0

    def cpu(self):
        return proc_cpu(self.pid)

    def memory(self):
        return proc_status(self.pid)

    def wire(self):
        return socket_bytes(self.pid, exclude_ports={self.gui_port})

    def stop(self):
        stop_process(self.proc)
        if self.proc:
            self.log.close()


class SyncthingGroup:
    """Syncthing nodes alice, bob, … each configured with all the others (full mesh) and one
    folder `bench` shared by all; alice's folder is the source."""
    tool = "syncthing"

    def __init__(self, run, tag, nodes=2, sampler=None, case_sensitive=False):
        self.run, self.tag = run, tag
        self.nodes = {n: SyncthingNode(run, n, tag) for n in NAMES[:nodes]}
        self.dirs = {n: run.path(f"{tag}-st-{n}-folder") for n in self.nodes}
        for name, node in self.nodes.items():
            os.makedirs(self.dirs[name])
            others = [o for o in self.nodes.values() if o is not node]
            for other in others:
                node.add_peer(other)
            node.add_folder("bench", self.dirs[name], others, case_sensitive)
        for name, node in self.nodes.items():
            node.start()
            if sampler:
                sampler.watch(f"{tag}.{name}", node.pid)
        names = list(self.nodes)
        wait_until(f"{tag}: syncthing nodes connected", 60, lambda: all(
            self.nodes[a].connected(self.nodes[b]) for a in names for b in names if a != b), interval=0.2)
        self.settle(60)
        self.alice = self.nodes["alice"]
        self.source_dir = self.dirs["alice"]

    @property
    def receivers(self):
        return [n for n in self.nodes if n != "alice"]

    def target_dir(self, name):
        return self.dirs[name]

    def settle(self, timeout=300):
        wait_until(f"{self.tag}: syncthing folders idle", timeout,
                   lambda: all(n.idle("bench") for n in self.nodes.values()), interval=0.2)

    def share(self, directory=None, timeout=600):
        """The folder is shared from the start; content already in alice's folder is scanned and
        pulled now (before any clock)."""
        self.alice.api("POST", "/rest/db/scan?folder=bench")
        time.sleep(0.5)
        self.settle(timeout)

    def trigger(self, sub=None):
        from urllib.parse import quote
        self.alice.api("POST", "/rest/db/scan?folder=bench" + (f"&sub={quote(sub)}" if sub else ""))

    def watcher(self, on, delay_s=1):
        """Each node's watcher on (with `delay_s` of gathering) or off, through the REST config."""
        for node in self.nodes.values():
            node.api("PATCH", "/rest/config/folders/bench", {"fsWatcherEnabled": on, "fsWatcherDelayS": delay_s})
        # The folder restarts with the new setting; its watches are set up after its scan.
        time.sleep(3.0)
        self.settle(60)

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


class RsyncDaemon:
    """An rsync daemon on 127.0.0.1 (plaintext); `push` sends a path to it with `rsync -a`,
    with or without `--fsync`, and returns (seconds, bytes on the wire from --stats)."""

    def __init__(self, run, tag):
        import shutil
        self.rsync = shutil.which("rsync")
        self.root = run.path(f"{tag}-rsync")
        self.target = os.path.join(self.root, "module")
        os.makedirs(self.target)
        self.port = free_port()
        config = os.path.join(self.root, "rsyncd.conf")
        with open(config, "w") as f:
            f.write(f"pid file = {self.root}/rsyncd.pid\nuse chroot = no\nuid = {os.getuid()}\ngid = {os.getgid()}\n"
                    f"[bench]\n  path = {self.target}\n  read only = no\n")
        self.daemon = track(subprocess.Popen([self.rsync, "--daemon", "--no-detach", "--address=127.0.0.1",
                                              f"--port={self.port}", f"--config={config}"],
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_until("rsync daemon up", 10, self._up)

    def _up(self):
        import socket
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def push(self, source, extra=(), into=""):
        start = time.monotonic()
        proc = subprocess.run([self.rsync, "-a", "--stats", *extra, source,
                               f"rsync://127.0.0.1:{self.port}/bench/{into}"], capture_output=True, text=True)
        elapsed = time.monotonic() - start
        if proc.returncode != 0:
            raise BenchError(f"rsync {' '.join(extra)} failed: {proc.stderr.strip()[:300]}")
        wire = 0
        for line in proc.stdout.splitlines():
            if line.startswith(("Total bytes sent:", "Total bytes received:")):
                wire += int(line.split(":")[1].strip().replace(",", ""))
        return elapsed, wire

    def children_cpu(self):
        """CPU seconds of the daemon's children it has reaped (each connection's receiver)."""
        try:
            with open(f"/proc/{self.daemon.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[13]) + int(fields[14])) / CLK_TCK
        except OSError:
            return 0.0

    def close(self):
        stop_process(self.daemon, timeout=5)


def rsync_version():
    out = subprocess.run(["rsync", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    return out.strip() or None


def syncthing_version():
    out = subprocess.run(["syncthing", "--version"], capture_output=True, text=True).stdout.split()
    return out[1] if len(out) > 1 else None
