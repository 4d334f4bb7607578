"""Generated data for the workloads: random files, many small files, a home-like tree; and the
checks that a receiver's copy is right."""
import fcntl
import hashlib
import math
import os
import random
import struct
import subprocess

from .procs import MiB, GiB

FIXED_MTIME_NS = 1_600_000_000_123_456_789


def write_random_file(path, size):
    block = 8 * MiB
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(block, left)
            f.write(os.urandom(n))
            left -= n
    os.utime(path, ns=(FIXED_MTIME_NS, FIXED_MTIME_NS))


def quiet_disk():
    """Writes everything dirty to disk before a workload's clock starts (every tool, every
    workload). On two machines the receiver's disk holds none of the sender's files; here
    they share one, and a receiver's syncfs would write the sender's staging files inside
    its figure (measured, session 17: a 0.47 s syncfs at the end of A-share)."""
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


FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_TOPDIR_FL = 0x80086601, 0x40086602, 0x00020000


def spread_directories(path):
    """Marks `path` as a top of directory hierarchies (`chattr +T`, ext4's Orlov allocator):
    each directory made in it goes to a block group with the fewest directories among those
    with more free inodes and blocks than average, searched from a hash of its name, and its
    files to that group; without the mark they go to `path`'s group, next to everything else
    made in /tmp. Why: this machine's ext4 has no journal, and such an ext4 does not reuse an
    inode freed less than 60 s ago (300 s more while its inode table block is not written
    back): every new file's search walks past each such inode of its group (`recently_deleted`,
    a buffer lookup each). After a deletion of many files near the bench's, bob's B cost 40 %
    more CPU (1.77 s against 0.85 s) — whoever deleted them: a workload before it, another
    bench, any program's temporary files in /tmp. True when the mark is set (ext4; other file
    systems place files their own way)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        flags = struct.unpack("l", fcntl.ioctl(fd, FS_IOC_GETFLAGS, struct.pack("l", 0)))[0]
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("l", flags | FS_TOPDIR_FL))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def set_aside(work, path):
    """Moves a tree of many files out of the way instead of deleting it; the bench deletes
    them all at its end. On this machine's ext4 (no journal) the inode allocator skips every
    inode freed in the last minutes (`recently_deleted`, see spread_directories): deleting one
    B run's 20,000 files made the next tool's 10,000 creates cost 1-2.5 s more system time."""
    if not os.path.lexists(path):
        return
    aside = os.path.join(work, "set-aside")
    os.makedirs(aside, exist_ok=True)
    os.rename(path, os.path.join(aside, f"{len(os.listdir(aside)):04d}-{os.path.basename(path)}"))


def overwrite_in_place(path, data, offset):
    """C's change: `data` written over the file at `offset`, in place (no new inode)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)


def big_file_arrived(source, target, size):
    """The receiver's copy is complete (tools rename complete files into place) and identical."""
    try:
        return os.path.getsize(target) == size and same_content(source, target)
    except OSError:
        return False


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


def write_small_files(directory, count, size):
    """B's files: `count` files of `size` random bytes in one folder; returns {name: bytes}."""
    os.makedirs(directory)
    contents = {}
    width = max(5, len(str(count - 1)))
    for i in range(count):
        name = f"f{i:0{width}d}.bin"
        contents[name] = os.urandom(size)
        with open(os.path.join(directory, name), "wb") as f:
            f.write(contents[name])
    return contents


def is_tool_name(name):
    """Temporary and marker files of the tools (never counted as content)."""
    return name.startswith((".syncthing.", ".stfolder", ".stversions", ".syncpeer")) or name.endswith(
        ".syncpeer-tmp") or ".syncpeer-partial" in name or name.endswith(".tmp") and name.startswith("~syncthing~")


def small_files_arrived(target, contents, state):
    """Every file of `contents` in `target` with its content, and nothing else."""
    try:
        names = [e.name for e in os.scandir(target) if e.is_file(follow_symlinks=False) and not is_tool_name(e.name)]
    except FileNotFoundError:
        return False
    state["seen"] = len(names)
    if len(names) != len(contents):
        return False
    for name in names:
        with open(os.path.join(target, name), "rb") as f:
            if f.read() != contents.get(name):
                return False
    return True


def make_tiny_files(root, count, dirs):
    """count files of 1–16 B (random, nearly all different) in dirs folders under root;
    os.open/os.write relative to the folder's descriptor (fast enough for a million)."""
    per_dir = max(1, count // dirs)
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


WORDS = ("doc", "photos", "music", "src", "notes", "work", "old", "backup", "projects", "misc", "tax", "cv",
         "trip", "build", "assets", "data", "lib", "test", "img", "video", "mail", "report", "draft", "archive")
EXTS = (".txt", ".jpg", ".pdf", ".md", ".png", ".c", ".py", ".mp3", ".json", ".odt", ".zip", ".mp4", "")


def home_tree_plan(files=50_000, total=2 * GiB, dirs=5_000, smallest=1024, largest=64 * MiB, seed=43):
    """The shape of workload D, from a fixed seed: `dirs` folders (each under a random earlier
    one, so depth varies), `files` sizes log-normal (median 4 KiB before scaling, sigma 2.3) clipped to
    [smallest, largest] and scaled so they sum to `total`, placed with a skew (a few folders
    hold many files). Returns (directories, [(path, size)])."""
    rng = random.Random(seed)
    directories = [""]
    for i in range(1, dirs):
        parent = directories[int(len(directories) * rng.random() ** 2)] if rng.random() < 0.9 else ""
        directories.append(os.path.join(parent, f"{rng.choice(WORDS)}-d{i}"))
    raw = [rng.lognormvariate(math.log(4096), 2.3) for _ in range(files)]
    scale = 1.0
    for _ in range(60):  # the scale that makes the clipped sizes add up to `total`
        sizes = [min(largest, max(smallest, int(r * scale))) for r in raw]
        s = sum(sizes)
        if abs(s - total) <= total // 1000:
            break
        scale *= total / s
    plan = []
    for i, size in enumerate(sizes):
        folder = directories[int(dirs * rng.random() ** 1.5) % dirs]
        plan.append((os.path.join(folder, f"{rng.choice(WORDS)}-{i}{rng.choice(EXTS)}"), size))
    return directories[1:], plan


def write_tree(root, plan):
    """Writes a planned tree (random content: the shape is fixed, the bytes need not be)."""
    directories, entries = plan
    os.makedirs(root, exist_ok=True)
    for d in directories:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for path, size in entries:
        with open(os.path.join(root, path), "wb") as f:
            left = size
            while left > 0:
                n = min(left, 8 * MiB)
                f.write(os.urandom(n))
                left -= n


def tree_sizes(root):
    """{relative path: size} of the regular files under root, tools' own files left out."""
    out = {}
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel)))
        except FileNotFoundError:
            continue
        for e in entries:
            if is_tool_name(e.name):
                continue
            path = os.path.join(rel, e.name)
            if e.is_dir(follow_symlinks=False):
                stack.append(path)
            elif e.is_file(follow_symlinks=False):
                out[path] = e.stat(follow_symlinks=False).st_size
    return out


def tree_digest(root, paths):
    """One BLAKE2b over the paths (sorted) and their contents."""
    h = hashlib.blake2b(digest_size=16)
    for path in sorted(paths):
        h.update(path.encode() + b"\0")
        with open(os.path.join(root, path), "rb") as f:
            while chunk := f.read(8 * MiB):
                h.update(chunk)
    return h.hexdigest()


class TreeArrival:
    """D's check: every planned file present with its size (a walk of stats each poll), then
    once the whole content is compared with `digest` (tree_digest of the source, taken before
    the clock); a mismatch sends it back to polling."""

    def __init__(self, plan, digest):
        self.expected = {path: size for path, size in plan[1]}
        self.digest = digest
        self.seen = 0

    def __call__(self, target_root):
        sizes = tree_sizes(target_root)
        self.seen = sum(1 for p, s in sizes.items() if self.expected.get(p) == s)
        if sizes != self.expected:
            return False
        return tree_digest(target_root, self.expected) == self.digest
