"""This machine's own limits, measured in the same run: loopback TCP copies, disk write with
fsync, and the crypto and chunking primitives (through syncpeer-bench)."""
import json
import os
import socket
import subprocess
import time

from .files import drop_file_cache
from .procs import MB, MiB, BenchError, log

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


