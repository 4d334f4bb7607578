#!/usr/bin/python3
"""Unit tests of powerlossfs.py: small programs whose outcome after a power cut is known.

Run: /usr/bin/python3 Tests/EndToEndTests/PowerLoss/test_powerlossfs.py (as root, with /dev/fuse
and python3-pyfuse3). Prints "SKIP: <why>" and exits 77 where FUSE cannot be used.
"""

import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FS = os.path.join(HERE, "powerlossfs.py")


def fuse_unavailable():
    """Why FUSE cannot be used here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if os.geteuid() != 0:
        return "not root (mounting needs it)"
    try:
        import pyfuse3  # noqa: F401
        import trio  # noqa: F401
    except ImportError:
        return "python3-pyfuse3 is not installed (scripts/install-deps.sh installs it)"
    return None


class Mount:
    """A powerlossfs mounted on a temporary directory for one test."""

    def __init__(self):
        self.base = tempfile.mkdtemp(prefix="powerlossfs-")
        self.store = os.path.join(self.base, "store")
        self.root = os.path.join(self.base, "mnt")
        self.control = os.path.join(self.base, "control.sock")
        os.mkdir(self.root)
        self.process = subprocess.Popen([sys.executable, FS, "mount", self.store, self.root, self.control])
        deadline = time.time() + 15
        while not (os.path.ismount(self.root) and os.path.exists(self.control)):
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError("powerlossfs did not mount")
            time.sleep(0.05)

    def run(self, program):
        """Runs a small Python program with the mount as its working directory, to its end."""
        subprocess.run([sys.executable, "-c", textwrap.dedent(program)], cwd=self.root, check=True)

    def cut(self, seed=None):
        words = ["cut"] + ([str(seed)] if seed is not None else [])
        subprocess.run([sys.executable, FS, "ctl", self.control] + words, check=True, capture_output=True)

    def path(self, name):
        return os.path.join(self.root, name)

    def read(self, name):
        with open(self.path(name), "rb") as file:
            return file.read()

    def close(self):
        subprocess.run(["fusermount3", "-u", self.root], check=False)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        subprocess.run(["rm", "-rf", self.base], check=False)


WRITE = """
import os
def write(name, data, sync_file=False, datasync=False, sync_dir=False, mode="wb"):
    with open(name, mode) as f:
        f.write(data)
        f.flush()
        if sync_file:
            (os.fdatasync if datasync else os.fsync)(f.fileno())
    if sync_dir:
        sync(os.path.dirname(name) or ".")
def sync(directory):
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)
"""


class PowerLossTests(unittest.TestCase):
    def setUp(self):
        self.mount = Mount()

    def tearDown(self):
        self.mount.close()

    def test_write_without_fsync_is_lost(self):
        self.mount.run(WRITE + "write('a', b'durable', True, sync_dir=True)\nwrite('a', b'lost', mode='ab')")
        self.assertEqual(self.mount.read("a"), b"durablelost")
        self.mount.cut()
        self.assertEqual(self.mount.read("a"), b"durable")

    def test_write_and_fsync_and_dir_fsync_is_kept(self):
        self.mount.run(WRITE + "write('a', b'kept', True, sync_dir=True)")
        self.mount.cut()
        self.assertEqual(self.mount.read("a"), b"kept")

    def test_fdatasync_keeps_data(self):
        self.mount.run(WRITE + "write('a', b'', sync_dir=True)\nwrite('a', b'data', True, datasync=True, mode='ab')")
        self.mount.cut()
        self.assertEqual(self.mount.read("a"), b"data")

    def test_created_file_synced_without_dir_fsync_loses_its_name(self):
        self.mount.run(WRITE + "write('a', b'data', True)")
        self.assertTrue(os.path.exists(self.mount.path("a")))
        self.mount.cut()
        self.assertFalse(os.path.exists(self.mount.path("a")))

    def test_name_synced_but_data_not_comes_back_empty(self):
        self.mount.run(WRITE + "write('a', b'data', sync_dir=True)")
        self.mount.cut()
        self.assertEqual(self.mount.read("a"), b"")

    def test_rename_then_dir_fsync_is_kept(self):
        self.mount.run(WRITE + """
write('old', b'old', True, sync_dir=True)
write('tmp', b'new', True)
os.rename('tmp', 'old')
sync('.')
""")
        self.mount.cut()
        self.assertEqual(self.mount.read("old"), b"new")
        self.assertFalse(os.path.exists(self.mount.path("tmp")))

    def test_rename_without_dir_fsync_is_undone(self):
        self.mount.run(WRITE + """
write('old', b'old', True, sync_dir=True)
write('tmp', b'new', True, sync_dir=True)
os.rename('tmp', 'old')
""")
        self.assertEqual(self.mount.read("old"), b"new")
        self.mount.cut()
        self.assertEqual(self.mount.read("old"), b"old")
        self.assertEqual(self.mount.read("tmp"), b"new")

    def test_unlink_without_dir_fsync_is_undone_and_with_it_kept(self):
        self.mount.run(WRITE + """
write('a', b'a', True)
write('b', b'b', True)
sync('.')
os.unlink('a')
os.unlink('b')
write('c', b'', sync_dir=True)
""")
        self.mount.cut()
        self.assertFalse(os.path.exists(self.mount.path("a")))
        self.assertFalse(os.path.exists(self.mount.path("b")))
        self.mount.run(WRITE + "write('d', b'd', True, sync_dir=True)\nos.unlink('d')")
        self.mount.cut()
        self.assertEqual(self.mount.read("d"), b"d")

    def test_truncate_without_fsync_is_undone(self):
        self.mount.run(WRITE + "write('a', b'0123456789', True, sync_dir=True)\nos.truncate('a', 3)")
        self.assertEqual(self.mount.read("a"), b"012")
        self.mount.cut()
        self.assertEqual(self.mount.read("a"), b"0123456789")

    def test_mode_and_mtime_need_fsync_not_fdatasync(self):
        self.mount.run(WRITE + """
os.umask(0o022)
write('a', b'a', True, sync_dir=True)
os.chmod('a', 0o600)
os.utime('a', ns=(10**18, 10**18))
fd = os.open('a', os.O_RDONLY); os.fdatasync(fd); os.close(fd)
""")
        self.mount.cut()
        status = os.stat(self.mount.path("a"))
        self.assertEqual(status.st_mode & 0o777, 0o644)
        self.assertNotEqual(status.st_mtime_ns, 10**18)
        self.mount.run("import os\nos.chmod('a', 0o600)\nos.utime('a', ns=(10**18, 10**18))\n"
                       "fd = os.open('a', os.O_RDONLY); os.fsync(fd); os.close(fd)")
        self.mount.cut()
        status = os.stat(self.mount.path("a"))
        self.assertEqual(status.st_mode & 0o777, 0o600)
        self.assertEqual(status.st_mtime_ns, 10**18)

    def test_rename_noreplace_and_exchange_are_renames(self):
        self.mount.run(WRITE + """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
write('a', b'a', True)
write('b', b'b', True)
sync('.')
assert libc.renameat2(-100, b'a', -100, b'b', 1) == -1 and ctypes.get_errno() == 17
assert libc.renameat2(-100, b'a', -100, b'b', 2) == 0
""")
        self.assertEqual(self.mount.read("a"), b"b")
        self.mount.cut()
        self.assertEqual(self.mount.read("a"), b"a")
        self.mount.run(WRITE + """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
assert libc.renameat2(-100, b'a', -100, b'c', 1) == 0
sync('.')
""")
        self.mount.cut()
        self.assertFalse(os.path.exists(self.mount.path("a")))
        self.assertEqual(self.mount.read("c"), b"a")

    def test_new_directory_needs_its_parent_synced_and_itself(self):
        self.mount.run(WRITE + """
os.makedirs('d/e')
write('d/e/f', b'f', True, sync_dir=True)
sync('d')
""")
        self.mount.cut()
        self.assertFalse(os.path.exists(self.mount.path("d")))
        self.mount.run(WRITE + """
os.makedirs('d/e')
write('d/e/f', b'f', True, sync_dir=True)
sync('d')
sync('.')
""")
        self.mount.cut()
        self.assertEqual(self.mount.read("d/e/f"), b"f")

    def test_rename_across_directories_needs_both_synced(self):
        self.mount.run(WRITE + """
os.mkdir('x'); os.mkdir('y'); sync('.')
write('x/a', b'a', True, sync_dir=True)
os.rename('x/a', 'y/a')
sync('x')
""")
        self.mount.cut()
        self.assertFalse(os.path.exists(self.mount.path("x/a")))
        self.assertFalse(os.path.exists(self.mount.path("y/a")))

    def test_hard_link_survives_when_its_directory_is_synced(self):
        self.mount.run(WRITE + "write('a', b'a', True)\nos.link('a', 'b')\nos.unlink('a')\nsync('.')")
        self.mount.cut()
        self.assertEqual(os.listdir(self.mount.root), ["b"])
        self.assertEqual(self.mount.read("b"), b"a")

    def test_syncfs_makes_nothing_durable(self):
        self.mount.run(WRITE + """
import ctypes
write('a', b'a')
fd = os.open('.', os.O_RDONLY)
assert ctypes.CDLL(None).syncfs(fd) == 0
""")
        self.mount.cut()
        self.assertFalse(os.path.exists(self.mount.path("a")))

    def test_sqlite_commits_in_wal_mode_survive_with_synchronous_full(self):
        self.mount.run("""
import sqlite3
db = sqlite3.connect('x.db')
db.execute('PRAGMA journal_mode=WAL'); db.execute('PRAGMA synchronous=FULL')
db.execute('CREATE TABLE t(v)'); db.commit()
for i in range(20):
    db.execute('INSERT INTO t VALUES (?)', (i,)); db.commit()
""")
        self.mount.cut()
        import sqlite3
        db = sqlite3.connect(self.mount.path("x.db"))
        self.assertEqual(db.execute("SELECT count(*) FROM t").fetchone()[0], 20)
        self.assertEqual(db.execute("PRAGMA integrity_check").fetchone()[0], "ok")
        db.close()

    def test_random_prefix_keeps_order_within_a_file(self):
        self.mount.run(WRITE + "write('a', b'', sync_dir=True)\n"
                       "with open('a', 'ab') as f:\n"
                       "    for i in range(50):\n"
                       "        f.write(b'%02d' % i); f.flush()")
        self.mount.cut(seed=7)
        data = self.mount.read("a")
        self.assertEqual(data, b"".join(b"%02d" % i for i in range(len(data) // 2)))
        self.assertTrue(0 < len(data) < 100, "seed 7 keeps a proper prefix")

    def test_a_rename_within_one_directory_is_never_torn(self):
        # Under any random prefix, a file renamed within one directory is at one of its two
        # names (never at none: rename(2) is atomic), while each rename stays a change of its own.
        for seed in range(1, 40):
            self.mount.run(WRITE + f"write('s{seed}', b'x', True, sync_dir=True)\n"
                           f"os.rename('s{seed}', 't{seed}')\nos.rename('t{seed}', 'u{seed}')")
            self.mount.cut(seed=seed)
            names = [name for name in (f"s{seed}", f"t{seed}", f"u{seed}") if os.path.exists(self.mount.path(name))]
            self.assertEqual(len(names), 1, f"seed {seed}: {names}")
            self.mount.run(f"import os\nos.unlink('{names[0]}')")


if __name__ == "__main__":
    reason = fuse_unavailable()
    if reason:
        print("SKIP: powerlossfs tests need FUSE: " + reason)
        sys.exit(77)
    unittest.main()
