#!/usr/bin/env python3
"""Cost of creating 10,000 x 4 KiB files in a fresh directory: named temp + rename vs O_TMPFILE + linkat
(run twice in a row: the first round pays ext4 recently_deleted after the previous run's deletion)."""
import os, time, sys, shutil
base = "/tmp/mbtest"
shutil.rmtree(base, ignore_errors=True); os.makedirs(base)
data = os.urandom(4096)
def named(d, n):
    os.makedirs(d)
    dfd = os.open(d, os.O_DIRECTORY)
    t = time.perf_counter()
    fds = []
    for i in range(n):
        fd = os.open(f".syncpeer-tmp-{i:05d}", os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600, dir_fd=dfd)
        os.pwrite(fd, data, 0); os.fchmod(fd, 0o644); os.close(fd)
    t1 = time.perf_counter()
    for i in range(n):
        os.rename(f".syncpeer-tmp-{i:05d}", f"f{i:05d}.bin", src_dir_fd=dfd, dst_dir_fd=dfd)
    t2 = time.perf_counter()
    return t1 - t, t2 - t1
def tmpfile(d, n):
    os.makedirs(d)
    dfd = os.open(d, os.O_DIRECTORY)
    t = time.perf_counter()
    fds = []
    for i in range(n):
        fd = os.open(".", os.O_RDWR | os.O_TMPFILE, 0o600, dir_fd=dfd)
        os.pwrite(fd, data, 0); os.fchmod(fd, 0o644); fds.append(fd)
    t1 = time.perf_counter()
    for i, fd in enumerate(fds):
        os.link(f"/proc/self/fd/{fd}", f"f{i:05d}.bin", dst_dir_fd=dfd, follow_symlinks=True); os.close(fd)
    t2 = time.perf_counter()
    return t1 - t, t2 - t1
n = 10000
for r in range(2):
    for f in (named, tmpfile):
        d = f"{base}/{f.__name__}{r}"
        a, b = f(d, n)
        print(f"{f.__name__}: create+write {a*1e6/n:.1f} us/file, place {b*1e6/n:.1f} us/file, total {(a+b):.2f}s")
