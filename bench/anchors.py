"""The anchors, each run the way its users run it: Syncthing nodes and groups (Debian's
Syncthing), an rsync daemon. Listening on 127.0.0.1 only, killed by PID, no proxy in any path."""
import json
import os
import subprocess
import time

from .peers import NAMES, free_port
from .procs import CLK_TCK, BenchError, proc_cpu, proc_status, socket_bytes, stop_process, track, wait_until


class SyncthingNode:
    """One Syncthing instance as its users run it on Linux (defaults: fsync on, case checks
    on, its own TLS), listening on 127.0.0.1 only: no global or local discovery, relays, NAT
    traversal, usage reporting, upgrades or crash reports, normal priority, REST on
    127.0.0.1 with an API key. STMONITORED: no monitor process, so the PID measured syncs."""

    def __init__(self, run, name, tag, relay=None):
        """`relay`: a relay URL to listen on and reach the others through, instead of TCP."""
        import secrets
        import xml.etree.ElementTree as ET
        self.run, self.name, self.ET, self.relay = run, name, ET, relay
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
        if relay:
            settings.update(listenAddress=relay, relaysEnabled="true")
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
        self.ET.SubElement(device, "address").text = self.relay or f"tcp://127.0.0.1:{other.port}"

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

    def api(self, method, path, body=None, quiet=False, timeout=30):
        import urllib.request
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.gui_port}{path}", method=method, data=data,
                                         headers={"X-API-Key": self.api_key, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                text = reply.read()
                return json.loads(text) if text else {}
        except (OSError, ValueError):
            if quiet:
                return None
            raise

    def connected(self, other):
        return self.connection(other).get("connected")

    def connection(self, other):
        """Its connection to `other` as /rest/system/connections says (`type`: tcp-client, relay-server, …)."""
        reply = self.api("GET", "/rest/system/connections", quiet=True) or {}
        return reply.get("connections", {}).get(other.device_id) or {}

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

    def __init__(self, run, tag, nodes=2, sampler=None, case_sensitive=False, relay=None):
        self.run, self.tag = run, tag
        self.nodes = {n: SyncthingNode(run, n, tag, relay) for n in NAMES[:nodes]}
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
        self.alice.api("POST", "/rest/db/scan?folder=bench", timeout=3600)
        time.sleep(0.5)
        self.settle(timeout)

    def trigger(self, sub=None):
        """POST /rest/db/scan answers when the scan has ended (syncpeer's rescan when it is
        queued); the receiver cannot be done before it, so the clock is not affected."""
        from urllib.parse import quote
        self.alice.api("POST", "/rest/db/scan?folder=bench" + (f"&sub={quote(sub)}" if sub else ""), timeout=3600)

    def watcher(self, on, delay_s=1):
        """Each node's watcher on (with `delay_s` of gathering) or off, through the REST config."""
        for node in self.nodes.values():
            node.api("PATCH", "/rest/config/folders/bench", {"fsWatcherEnabled": on, "fsWatcherDelayS": delay_s})
        # The folder restarts with the new setting; its watches are set up after its scan.
        time.sleep(3.0)
        self.settle(60)

    def pids(self):
        return {n: d.pid for n, d in self.nodes.items()}

    def limit_upload(self, name, rate):
        """Caps what node `name` sends at `rate` bytes/s (its `maxSendKbps`, in KiB/s), on the
        LAN too (Syncthing leaves LAN peers unlimited by default)."""
        self.nodes[name].api("PATCH", "/rest/config/options", {"maxSendKbps": max(1, rate // 1024), "limitBandwidthInLan": True})
        time.sleep(1.0)

    def close(self):
        for d in self.nodes.values():
            d.stop()


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
