"""python3 -m bench.wormhole --syncpeer BIN: one file (1 GiB by default) through a local Magic
Wormhole transit relay, four ways side by side, interleaved round by round: syncpeer→wormhole,
wormhole→syncpeer, wormhole→wormhole, syncpeer→syncpeer (issue 40's closing figures).

A local mailbox server and transit relay (Debian's twist3, as the interop tests run them) on
127.0.0.1; every transfer goes through the relay (`wormhole --no-listen`; syncpeer offers no
direct hint). As root it runs inside a network namespace of its own (loopback only, removed at
the end). Per run: seconds from the sender's start until both ends exited, MB/s, and CPU-s of
the sender, the receiver (wait4's rusage: each process and what it waited for) and the relay
(/proc), with the load average at its start; the received file is compared with the sent one.
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

from .files import write_random_file
from .procs import GiB, MB, BenchError, kill_started, load_average, log, proc_cpu, track

PAIRS = (("syncpeer", "wormhole"), ("wormhole", "syncpeer"), ("wormhole", "wormhole"), ("syncpeer", "syncpeer"))


def options():
    p = argparse.ArgumentParser(prog="python3 -m bench.wormhole", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--syncpeer", required=True, help="the syncpeer binary (release build for figures)")
    p.add_argument("--wormhole", default="/usr/bin/wormhole", help="the wormhole client (default: Debian's)")
    p.add_argument("--size", type=int, default=GiB, help="the file's size (default 1 GiB)")
    p.add_argument("--rounds", type=int, default=1, help="rounds of the four transfers (default 1)")
    p.add_argument("--timeout", type=float, default=900, help="seconds one transfer may take")
    p.add_argument("--tmp", default="/tmp", help="where the temporary directory goes")
    p.add_argument("--output", default=".build/bench/wormhole.json")
    return p.parse_args()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise BenchError(f"nothing listens on 127.0.0.1:{port}")


class Servers:
    def __init__(self, work):
        self.mailbox_port, self.relay_port = free_port(), free_port()
        devnull = subprocess.DEVNULL
        self.mailbox = track(subprocess.Popen(
            ["/usr/bin/twist3", f"--log-file={work}/mailbox.log", "wormhole-mailbox",
             f"--port=tcp:{self.mailbox_port}:interface=127.0.0.1", f"--channel-db={work}/mailbox.sqlite"],
            cwd=work, stdin=devnull, stdout=devnull, stderr=devnull))
        self.relay = track(subprocess.Popen(
            ["/usr/bin/twist3", f"--log-file={work}/relay.log", "transitrelay", f"--port=tcp:{self.relay_port}:interface=127.0.0.1"],
            cwd=work, stdin=devnull, stdout=devnull, stderr=devnull))
        wait_listening(self.mailbox_port)
        wait_listening(self.relay_port)

    def syncpeer(self):
        return ["--mailbox", f"ws://127.0.0.1:{self.mailbox_port}/v1", "--transit-relay", f"127.0.0.1:{self.relay_port}"]

    def wormhole(self):
        return ["--relay-url", f"ws://127.0.0.1:{self.mailbox_port}/v1", "--transit-helper", f"tcp:127.0.0.1:{self.relay_port}"]


class Child:
    """A process whose stderr is collected and whose rusage is taken when it is reaped."""

    def __init__(self, argv, env, cwd):
        self.proc = track(subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        self.err = bytearray()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.cpu = None
        self.ended = None

    def _read(self):
        for chunk in iter(lambda: self.proc.stderr.read1(4096), b""):
            self.err += chunk

    def code(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(rb"receive (\d+-[a-z0-9-]+)", bytes(self.err))
            if m:
                return m.group(1).decode()
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise BenchError(f"no code printed: {bytes(self.err)[-500:]!r}")

    def reap(self, deadline):
        """Waits (polling, so a deadline holds) and records CPU-s from wait4's rusage."""
        while True:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                self.ended = time.monotonic()
                self.cpu = round(usage.ru_utime + usage.ru_stime, 2)
                self.reader.join(5)
                return self.proc.returncode
            if time.monotonic() > deadline:
                self.proc.kill()
                raise BenchError("timed out")
            time.sleep(0.01)


def one(args, servers, work, source, sender, receiver):
    inbox = os.path.join(work, "inbox")
    shutil.rmtree(inbox, ignore_errors=True)
    os.makedirs(inbox)
    env = {"PATH": "/usr/bin:/bin", "HOME": work, "LANG": "C.UTF-8", "SYNCPEER_INTERFACE": "lo"}
    if sender == "syncpeer":
        send = [args.syncpeer, "send", source, "--code"] + servers.syncpeer()
    else:
        send = [args.wormhole] + servers.wormhole() + ["send", "--no-listen", "--hide-progress", source]
    os.sync()
    load = load_average()
    relay_before = proc_cpu(servers.relay.pid)
    start = time.monotonic()
    tx = Child(send, env, work)
    code = tx.code()
    if receiver == "syncpeer":
        receive = [args.syncpeer, "receive", code, "--dir", inbox] + servers.syncpeer()
    else:
        receive = [args.wormhole] + servers.wormhole() + ["receive", "--no-listen", "--hide-progress", "--accept-file",
                                                           "--output-file", os.path.join(inbox, os.path.basename(source)), code]
    rx = Child(receive, env, work)
    deadline = start + args.timeout
    rx_status, tx_status = rx.reap(deadline), tx.reap(deadline)
    seconds = max(rx.ended, tx.ended) - start
    relay_after = proc_cpu(servers.relay.pid)
    if rx_status != 0 or tx_status != 0:
        raise BenchError(f"{sender}→{receiver}: exit {tx_status}/{rx_status}: {bytes(tx.err)[-300:]!r} {bytes(rx.err)[-300:]!r}")
    received = os.path.join(inbox, os.path.basename(source))
    if subprocess.run(["cmp", "-s", source, received]).returncode != 0:
        raise BenchError(f"{sender}→{receiver}: the received file differs")
    os.unlink(received)
    relay_cpu = round(sum(relay_after) - sum(relay_before), 2) if relay_before and relay_after else None
    return {"sender": sender, "receiver": receiver, "seconds": round(seconds, 2), "mb_s": round(args.size / MB / seconds, 1),
            "sender_cpu_s": tx.cpu, "receiver_cpu_s": rx.cpu, "relay_cpu_s": relay_cpu, "load": load}


def in_namespace():
    """As root (and not yet inside one): runs this module again inside a namespace of its own."""
    if os.geteuid() != 0 or os.environ.get("BENCH_WORMHOLE_NS") or not shutil.which("ip"):
        return None
    ns = f"syncpeer-wbench-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        env = dict(os.environ, BENCH_WORMHOLE_NS=ns)
        return subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-m", "bench.wormhole"] + sys.argv[1:], env=env).returncode
    finally:
        subprocess.run(["ip", "netns", "del", ns])


def main():
    args = options()
    status = in_namespace()
    if status is not None:
        return status
    for tool in (args.syncpeer, args.wormhole, "/usr/bin/twist3"):
        if not os.access(tool, os.X_OK):
            raise SystemExit(f"bench.wormhole: {tool} is missing (scripts/install-deps.sh installs the wormhole tools)")
    work = tempfile.mkdtemp(prefix="syncpeer-wbench-", dir=args.tmp)
    runs = []
    try:
        source = os.path.join(work, "payload.bin")
        log(f"writing {args.size / (1 << 20):.0f} MiB of random data")
        write_random_file(source, args.size)
        servers = Servers(work)
        version = subprocess.run([args.wormhole, "--version"], capture_output=True, text=True).stdout.strip()
        for round_ in range(args.rounds):
            for sender, receiver in PAIRS:
                log(f"round {round_ + 1}: {sender} → {receiver}")
                result = one(args, servers, work, source, sender, receiver)
                result["round"] = round_ + 1
                runs.append(result)
                log(json.dumps(result))
    finally:
        kill_started()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.size / GiB:.2f} GiB through a local transit relay ({version}); seconds until both ends exited")
    print(f"{'round':>5}  {'sender → receiver':<22}{'s':>8}{'MB/s':>8}{'send CPU-s':>12}{'recv CPU-s':>12}{'relay CPU-s':>12}  load")
    for r in runs:
        print(f"{r['round']:>5}  {r['sender'] + ' → ' + r['receiver']:<22}{r['seconds']:>8}{r['mb_s']:>8}"
              f"{r['sender_cpu_s']:>12}{r['receiver_cpu_s']:>12}{str(r['relay_cpu_s']):>12}  {r['load'][0]}")
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump({"size": args.size, "wormhole": version, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
