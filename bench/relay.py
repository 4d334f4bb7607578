"""R: A-share through a local relay. One Syncthing relay (Debian's strelaysrv on 127.0.0.1,
`-pools=`: private) carries a 1 GiB file for two syncpeer nodes, then for two Syncthing nodes
(interleaved with nothing else running): each tool's nodes can reach each other only through
it (syncpeer: paired by certificate ID through the relay, no direct retry during the run;
Syncthing: listening on the relay only, each the other's address the relay URL). Figures as
every folder workload's, plus the relay's CPU-s and peak RSS, and the path each tool used."""
import json
import os
import re
import subprocess

from . import folders
from .anchors import SyncthingGroup
from .peers import SyncpeerGroup, free_port, reset_peak
from .procs import BenchError, log, proc_cpu, proc_status, stop_process, track, wait_until


class RelayServer:
    def __init__(self, run):
        self.keys = run.path("relay-keys")
        os.makedirs(self.keys)
        self.log_path = run.path("relay.log")
        run.daemon_logs.append(self.log_path)
        self.log = open(self.log_path, "wb")
        port = free_port()
        self.proc = track(subprocess.Popen(["strelaysrv", "-listen", f"127.0.0.1:{port}", "-keys", self.keys, "-pools=",
                                            "-status-srv=", "-nat=false"], stdout=self.log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, env=run.env, start_new_session=True))
        self.pid = self.proc.pid

        def uri():
            with open(self.log_path, errors="replace") as f:
                found = re.search(r"relay://[^\s&]+", f.read())
            return found and found.group(0)
        self.url = wait_until("strelaysrv up", 30, uri)

    def stop(self):
        stop_process(self.proc)
        self.log.close()


def through(relay, group, size):
    """A-share on `group`, the relay's CPU-s and peak RSS measured over the same span."""
    reset_peak(relay.pid)
    before = proc_cpu(relay.pid)
    result = folders.a_share(group, size)
    after = proc_cpu(relay.pid)
    if before and after:
        result["relay_cpu_s"] = round(after[0] + after[1] - before[0] - before[1], 2)
    result["relay_peak_rss"] = proc_status(relay.pid).get("VmHWM")
    return result


def syncpeer_path(group):
    for line in group.alice.cli("peers", "--json").splitlines():
        peer = json.loads(line) if line.strip() else {}
        if (peer.get("peer") or {}).get("name") == "bob":
            return peer.get("path")
    return None


def measure(args, run, results, sampler, guarded):
    if not args.relay_size:
        return
    relay = RelayServer(run)
    try:
        env = dict(run.env, SYNCPEER_DIRECT_RETRY_MS=str(24 * 3600 * 1000))  # the relay carries it all along

        def ours():
            group = SyncpeerGroup(run, "relay", 2, sampler, arguments=("--relay", relay.url), env=env, by_certificate=True)
            try:
                empty = run.path("relay-share")
                os.makedirs(empty)
                group.share(empty, args.timeout)
                path = syncpeer_path(group)
                if not (path or "").startswith("relay "):
                    raise BenchError(f"syncpeer's session does not run through the relay: {path}")
                result = through(relay, group, args.relay_size)
                result["path"] = syncpeer_path(group)
                return result
            finally:
                group.close()

        def theirs():
            group = SyncthingGroup(run, "relay", 2, sampler, relay=relay.url)
            try:
                kind = group.alice.connection(group.nodes["bob"]).get("type", "")
                if not kind.startswith("relay"):
                    raise BenchError(f"Syncthing's connection does not run through the relay: {kind}")
                result = through(relay, group, args.relay_size)
                result["path"] = group.alice.connection(group.nodes["bob"]).get("type")
                return result
            finally:
                group.close()
        log(f"R: {args.relay_size / 2**20:,.0f} MiB through a local strelaysrv")
        results["syncpeer"]["relay"] = guarded(results, "syncpeer relay", ours)
        if "syncthing" not in args.skip:
            results["syncthing"]["relay"] = guarded(results, "syncthing relay", theirs)
    finally:
        relay.stop()
