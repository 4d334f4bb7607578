#!/usr/bin/python3
"""A FUSE file system that can lose power: a test tool, never part of the product.

Usage:
  powerlossfs.py mount STORE MOUNTPOINT CONTROL_SOCKET   serve (foreground) until unmounted
  powerlossfs.py ctl CONTROL_SOCKET cut [SEED]           lose power (SEED: keep a random prefix)
  powerlossfs.py ctl CONTROL_SOCKET stats                counts, as one JSON line

Every file's bytes live in STORE/live/<inode>; what has been made durable in STORE/durable/<inode>;
names, modes and times in memory. What counts as durable follows POSIX and ext4's documented
guarantees, conservatively (the least a program may rely on):

- a file's data and size: after fsync or fdatasync of that file; its mode, owner and times:
  after fsync (fdatasync need not write them);
- a name (create, mkdir, symlink, link, rename's two ends, unlink, rmdir): after fsync of the
  directory that holds it; a rename is two changes, one in each directory (conservatively, not
  atomic across two directories), and one change within one directory (rename(2) is atomic:
  no file system that journals names, and no program, can lose both names of a file to a
  cut there); RENAME_NOREPLACE and RENAME_EXCHANGE are renames too;
- syncfs(2) and sync(2) reach a FUSE file system only as the writes of dirty pages, never as a
  barrier (the kernel forwards syncfs to virtiofs alone): so here, as on sshfs or any other
  FUSE file system, they make nothing durable;
- a file whose name is durable but whose data never was comes back empty (ext4 delayed
  allocation), one whose name never was is gone; SQLite's WAL and -shm files are files.

`cut` undoes every change that is not durable: every write, truncate, create, rename, unlink
and metadata change since that object's last sync. With a SEED, each file and directory keeps
a random prefix of its own pending changes instead (torn across objects, in order within
one), as a disk that wrote back some of its cache would. Run `cut` only once every process
using the mount has been killed (power cuts end processes too); the kernel's caches are kept
out of the way (no attribute or entry caching, page cache dropped at open).
"""

import errno
import json
import os
import random
import stat
import sys
import time

ROOT = 1
# Beyond this many pending bytes, a file's log is folded into "all of it at the next sync"
# (a random prefix is then all or nothing for that file).
LOG_LIMIT = 16 << 20


class Node:
    """One inode: its live state (what programs see) and its durable state."""

    def __init__(self, ino, mode, target=None):
        self.ino = ino
        self.mode = mode
        self.uid = 0
        self.gid = 0
        now = time.time_ns()
        self.atime = self.mtime = self.ctime = now
        self.target = target          # symlink target (bytes), fixed at creation
        self.entries = {} if stat.S_ISDIR(mode) else None   # name -> ino (live)
        self.durable_entries = {} if stat.S_ISDIR(mode) else None
        self.entry_log = []           # directory changes since the last fsyncdir: [(name, ino|None), ...]
        self.data_log = []            # file changes since the last sync: ("w", off, bytes) / ("t", size)
        self.log_bytes = 0
        self.log_folded = False       # log too big: the next sync copies the whole file
        self.durable_meta = (mode, 0, 0, now, now)
        self.meta_dirty = False
        self.nlink = 0

    def meta(self):
        return (self.mode, self.uid, self.gid, self.atime, self.mtime)


class PowerLossFS:
    """The file system's state and its rules, without FUSE (the FUSE adapter calls these)."""

    def __init__(self, store):
        self.store = store
        os.makedirs(os.path.join(store, "live"), exist_ok=True)
        os.makedirs(os.path.join(store, "durable"), exist_ok=True)
        self.nodes = {ROOT: Node(ROOT, stat.S_IFDIR | 0o755)}
        self.nodes[ROOT].nlink = 1
        self.next_ino = ROOT + 1
        self.fds = {}                 # ino -> descriptor of its live object
        self.cuts = 0
        self.lost_changes = 0

    # --- objects on the backing directory ---
    def live_path(self, ino):
        return os.path.join(self.store, "live", str(ino))

    def durable_path(self, ino):
        return os.path.join(self.store, "durable", str(ino))

    def fd(self, ino):
        if ino not in self.fds:
            self.fds[ino] = os.open(self.live_path(ino), os.O_RDWR | os.O_CREAT, 0o600)
        return self.fds[ino]

    def node(self, ino):
        node = self.nodes.get(ino)
        if node is None:
            raise OSError(errno.ENOENT, "no such inode")
        return node

    def size(self, node):
        return os.fstat(self.fd(node.ino)).st_size if stat.S_ISREG(node.mode) else (
            len(node.target) if node.target is not None else 4096 if node.entries is not None else 0)

    # --- names ---
    def child(self, parent, name):
        directory = self.node(parent)
        if directory.entries is None:
            raise OSError(errno.ENOTDIR, "not a directory")
        ino = directory.entries.get(name)
        if ino is None:
            raise OSError(errno.ENOENT, "no such entry")
        return self.nodes[ino]

    def set_entry(self, parent, name, ino, joined=False):
        """Sets or (ino None) removes a name; `joined`: as part of the directory's last change
        (the second name of a rename within one directory)."""
        directory = self.nodes[parent]
        old = directory.entries.get(name)
        if old is not None:
            self.nodes[old].nlink -= 1
        if ino is None:
            directory.entries.pop(name, None)
        else:
            directory.entries[name] = ino
            self.nodes[ino].nlink += 1
        if joined and directory.entry_log:
            directory.entry_log[-1].append((name, ino))
        else:
            directory.entry_log.append([(name, ino)])
        directory.mtime = directory.ctime = time.time_ns()
        directory.meta_dirty = True

    def new_node(self, parent, name, mode, uid=0, gid=0, target=None):
        directory = self.node(parent)
        if directory.entries is None:
            raise OSError(errno.ENOTDIR, "not a directory")
        if name in directory.entries:
            raise OSError(errno.EEXIST, "exists")
        node = Node(self.next_ino, mode, target)
        node.uid, node.gid = uid, gid
        node.durable_meta = node.meta()
        self.next_ino += 1
        self.nodes[node.ino] = node
        if stat.S_ISREG(mode):
            self.fd(node.ino)
            os.ftruncate(self.fds[node.ino], 0)
        self.set_entry(parent, name, node.ino)
        return node

    def unlink(self, parent, name, directory_expected):
        node = self.child(parent, name)
        is_directory = stat.S_ISDIR(node.mode)
        if directory_expected and not is_directory:
            raise OSError(errno.ENOTDIR, "not a directory")
        if not directory_expected and is_directory:
            raise OSError(errno.EISDIR, "is a directory")
        if is_directory:
            if node.entries:
                raise OSError(errno.ENOTEMPTY, "not empty")
        self.set_entry(parent, name, None)
        node.ctime = time.time_ns()

    def link(self, ino, parent, name):
        node = self.node(ino)
        if stat.S_ISDIR(node.mode):
            raise OSError(errno.EPERM, "hard link to a directory")
        if name in self.node(parent).entries:
            raise OSError(errno.EEXIST, "exists")
        self.set_entry(parent, name, ino)
        node.ctime = time.time_ns()
        return node

    def rename(self, old_parent, old_name, new_parent, new_name, noreplace=False, exchange=False):
        node = self.child(old_parent, old_name)
        target_ino = self.node(new_parent).entries.get(new_name)
        if exchange:
            if target_ino is None:
                raise OSError(errno.ENOENT, "nothing to exchange with")
            self.set_entry(old_parent, old_name, target_ino)
            self.set_entry(new_parent, new_name, node.ino, joined=old_parent == new_parent)
            return
        if target_ino is not None:
            if noreplace:
                raise OSError(errno.EEXIST, "exists")
            if target_ino == node.ino:
                return
            target = self.nodes[target_ino]
            if stat.S_ISDIR(target.mode):
                if not stat.S_ISDIR(node.mode):
                    raise OSError(errno.EISDIR, "is a directory")
                if target.entries:
                    raise OSError(errno.ENOTEMPTY, "not empty")
            elif stat.S_ISDIR(node.mode):
                raise OSError(errno.ENOTDIR, "not a directory")
        if stat.S_ISDIR(node.mode):
            probe = new_parent
            while probe != ROOT:     # no directory into itself
                if probe == node.ino:
                    raise OSError(errno.EINVAL, "into itself")
                probe = self.parent_of(probe)
        self.set_entry(old_parent, old_name, None)
        self.set_entry(new_parent, new_name, node.ino, joined=old_parent == new_parent)
        node.ctime = time.time_ns()

    def parent_of(self, ino):
        for candidate in self.nodes.values():
            if candidate.entries and ino in candidate.entries.values():
                return candidate.ino
        return ROOT

    # --- data ---
    def log_data(self, node, change, size):
        if node.log_folded:
            return
        node.data_log.append(change)
        node.log_bytes += size
        if node.log_bytes > LOG_LIMIT:
            node.data_log, node.log_bytes, node.log_folded = [], 0, True

    def write(self, ino, offset, data):
        node = self.node(ino)
        written = os.pwrite(self.fd(ino), data, offset)
        self.log_data(node, ("w", offset, bytes(data[:written])), written)
        node.mtime = node.ctime = time.time_ns()
        node.meta_dirty = True
        return written

    def read(self, ino, offset, size):
        return os.pread(self.fd(ino), size, offset)

    def truncate(self, ino, size):
        node = self.node(ino)
        os.ftruncate(self.fd(ino), size)
        self.log_data(node, ("t", size), 0)
        node.mtime = node.ctime = time.time_ns()
        node.meta_dirty = True

    # --- durability ---
    def fsync(self, ino, datasync):
        node = self.node(ino)
        if stat.S_ISREG(node.mode):
            self.apply_data(node, len(node.data_log))
        if stat.S_ISDIR(node.mode):
            self.apply_entries(node, len(node.entry_log))
        if not datasync:
            node.durable_meta = node.meta()
            node.meta_dirty = False

    def apply_data(self, node, count):
        """Makes the first `count` pending changes of a file durable (all with a folded log)."""
        if node.log_folded:
            with open(self.live_path(node.ino), "rb") as live, open(self.durable_path(node.ino), "wb") as durable:
                durable.write(live.read())
            node.data_log, node.log_bytes, node.log_folded = [], 0, False
            return
        if count == 0:
            return
        descriptor = os.open(self.durable_path(node.ino), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            for change in node.data_log[:count]:
                if change[0] == "w":
                    os.pwrite(descriptor, change[2], change[1])
                else:
                    os.ftruncate(descriptor, change[1])
        finally:
            os.close(descriptor)
        node.data_log = node.data_log[count:]
        node.log_bytes = sum(len(change[2]) for change in node.data_log if change[0] == "w")

    def apply_entries(self, node, count):
        for change in node.entry_log[:count]:
            for name, ino in change:
                if ino is None:
                    node.durable_entries.pop(name, None)
                else:
                    node.durable_entries[name] = ino
        node.entry_log = node.entry_log[count:]

    def cut(self, seed=None):
        """Loses power: every change not durable is undone (with a seed, a random prefix of each
        object's pending changes is kept). Returns how many changes were lost."""
        chooser = random.Random(seed) if seed is not None else None
        lost = 0
        for ino in sorted(self.nodes):
            node = self.nodes[ino]
            if chooser is not None:
                if node.entry_log:
                    self.apply_entries(node, chooser.randint(0, len(node.entry_log)))
                if node.data_log:
                    self.apply_data(node, chooser.randint(0, len(node.data_log)))
                elif node.log_folded and chooser.random() < 0.5:
                    self.apply_data(node, 0)
                if node.meta_dirty and chooser.random() < 0.5:
                    node.durable_meta = node.meta()
            lost += len(node.entry_log) + len(node.data_log) + (1 if node.log_folded else 0)
        for node in self.nodes.values():
            self.restore(node)
        self.collect()
        self.cuts += 1
        self.lost_changes += lost
        return lost

    def restore(self, node):
        if node.entries is not None:
            node.entries = dict(node.durable_entries)
            node.entry_log = []
        if stat.S_ISREG(node.mode) and (node.data_log or node.log_folded):
            descriptor = self.fd(node.ino)
            os.ftruncate(descriptor, 0)
            if os.path.exists(self.durable_path(node.ino)):
                with open(self.durable_path(node.ino), "rb") as durable:
                    os.pwrite(descriptor, durable.read(), 0)
            node.data_log, node.log_bytes, node.log_folded = [], 0, False
        node.mode, node.uid, node.gid, node.atime, node.mtime = node.durable_meta
        node.ctime = node.mtime
        node.meta_dirty = False

    def collect(self):
        """After a cut: drops every inode no durable name reaches, recounts links."""
        reachable, stack = set(), [ROOT]
        while stack:
            ino = stack.pop()
            if ino in reachable or ino not in self.nodes:
                continue
            reachable.add(ino)
            if self.nodes[ino].entries:
                stack.extend(self.nodes[ino].entries.values())
        for ino in [ino for ino in self.nodes if ino not in reachable]:
            if ino in self.fds:
                os.close(self.fds.pop(ino))
            for path in (self.live_path(ino), self.durable_path(ino)):
                if os.path.exists(path):
                    os.unlink(path)
            del self.nodes[ino]
        for node in self.nodes.values():
            node.nlink = 1 if node.ino == ROOT else 0
        for node in self.nodes.values():
            if node.entries is not None:
                for ino in node.entries.values():
                    self.nodes[ino].nlink += 1

    def stats(self):
        pending = sum(len(n.entry_log) + len(n.data_log) for n in self.nodes.values())
        return {"cuts": self.cuts, "lost_changes": self.lost_changes, "inodes": len(self.nodes),
                "pending_changes": pending}


def serve(store, mountpoint, control):
    import pyfuse3
    import trio

    fs = PowerLossFS(store)

    def attributes(node):
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = node.ino
        entry.st_mode = node.mode
        entry.st_nlink = node.nlink if node.entries is None else 2 + sum(
            1 for ino in node.entries.values() if fs.nodes[ino].entries is not None)
        entry.st_uid, entry.st_gid = node.uid, node.gid
        entry.st_size = fs.size(node)
        entry.st_blksize = 4096
        entry.st_blocks = (entry.st_size + 511) // 512
        entry.st_atime_ns, entry.st_mtime_ns, entry.st_ctime_ns = node.atime, node.mtime, node.ctime
        entry.entry_timeout = 0
        entry.attr_timeout = 0
        entry.generation = 0
        return entry

    def checked(function):
        async def wrapper(*arguments, **keywords):
            try:
                return function(*arguments, **keywords)
            except OSError as error:
                raise pyfuse3.FUSEError(error.errno or errno.EIO)
        return wrapper

    class Operations(pyfuse3.Operations):
        supports_dot_lookup = False
        enable_writeback_cache = False
        enable_acl = False

        def __init__(self):
            super().__init__()
            self.handles = {}
            self.next_handle = 1

        def handle(self, ino):
            fh = self.next_handle
            self.next_handle += 1
            self.handles[fh] = ino
            return fh

        def ino(self, fh):
            if fh not in self.handles:
                raise OSError(errno.EBADF, "stale handle")
            return self.handles[fh]

        lookup = checked(lambda self, parent, name, ctx: attributes(fs.child(parent, name.decode("utf-8", "surrogateescape"))))
        getattr = checked(lambda self, ino, ctx: attributes(fs.node(ino)))

        @checked
        def setattr(self, ino, attr, fields, fh, ctx):
            node = fs.node(ino)
            if fields.update_size:
                fs.truncate(ino, attr.st_size)
            if fields.update_mode:
                node.mode = stat.S_IFMT(node.mode) | stat.S_IMODE(attr.st_mode)
            if fields.update_uid:
                node.uid = attr.st_uid
            if fields.update_gid:
                node.gid = attr.st_gid
            if fields.update_atime:
                node.atime = attr.st_atime_ns
            if fields.update_mtime:
                node.mtime = attr.st_mtime_ns
            node.ctime = time.time_ns()
            node.meta_dirty = True
            return attributes(node)

        readlink = checked(lambda self, ino, ctx: fs.node(ino).target)

        @checked
        def mkdir(self, parent, name, mode, ctx):
            return attributes(fs.new_node(parent, name.decode("utf-8", "surrogateescape"),
                                          stat.S_IFDIR | stat.S_IMODE(mode), ctx.uid, ctx.gid))

        @checked
        def symlink(self, parent, name, target, ctx):
            return attributes(fs.new_node(parent, name.decode("utf-8", "surrogateescape"),
                                          stat.S_IFLNK | 0o777, ctx.uid, ctx.gid, target=target))

        @checked
        def mknod(self, parent, name, mode, rdev, ctx):
            if not (stat.S_ISREG(mode) or stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode)):
                raise OSError(errno.EPERM, "no device files")
            return attributes(fs.new_node(parent, name.decode("utf-8", "surrogateescape"), mode, ctx.uid, ctx.gid))

        @checked
        def create(self, parent, name, mode, flags, ctx):
            node = fs.new_node(parent, name.decode("utf-8", "surrogateescape"),
                               stat.S_IFREG | stat.S_IMODE(mode), ctx.uid, ctx.gid)
            return pyfuse3.FileInfo(fh=self.handle(node.ino), keep_cache=False), attributes(node)

        unlink = checked(lambda self, parent, name, ctx: fs.unlink(parent, name.decode("utf-8", "surrogateescape"), False))
        rmdir = checked(lambda self, parent, name, ctx: fs.unlink(parent, name.decode("utf-8", "surrogateescape"), True))

        @checked
        def link(self, ino, parent, name, ctx):
            return attributes(fs.link(ino, parent, name.decode("utf-8", "surrogateescape")))

        @checked
        def rename(self, old_parent, old_name, new_parent, new_name, flags, ctx):
            fs.rename(old_parent, old_name.decode("utf-8", "surrogateescape"), new_parent,
                      new_name.decode("utf-8", "surrogateescape"),
                      noreplace=bool(flags & pyfuse3.RENAME_NOREPLACE), exchange=bool(flags & pyfuse3.RENAME_EXCHANGE))

        @checked
        def open(self, ino, flags, ctx):
            node = fs.node(ino)
            if flags & os.O_TRUNC:
                fs.truncate(ino, 0)
            return pyfuse3.FileInfo(fh=self.handle(node.ino), keep_cache=False)

        read = checked(lambda self, fh, off, size: fs.read(self.ino(fh), off, size))
        write = checked(lambda self, fh, off, buf: fs.write(self.ino(fh), off, buf))
        flush = checked(lambda self, fh: None)

        @checked
        def release(self, fh):
            self.handles.pop(fh, None)

        fsync = checked(lambda self, fh, datasync: fs.fsync(self.ino(fh), datasync))

        @checked
        def opendir(self, ino, ctx):
            if fs.node(ino).entries is None:
                raise OSError(errno.ENOTDIR, "not a directory")
            return self.handle(ino)

        async def readdir(self, fh, start_id, token):
            try:
                node = fs.node(self.ino(fh))
            except OSError as error:
                raise pyfuse3.FUSEError(error.errno)
            names = sorted(node.entries)
            for index in range(start_id, len(names)):
                child = fs.nodes[node.entries[names[index]]]
                if not pyfuse3.readdir_reply(token, names[index].encode("utf-8", "surrogateescape"),
                                             attributes(child), index + 1):
                    break

        @checked
        def releasedir(self, fh):
            self.handles.pop(fh, None)

        fsyncdir = checked(lambda self, fh, datasync: fs.fsync(self.ino(fh), datasync))

        @checked
        def statfs(self, ctx):
            backing = os.statvfs(store)
            result = pyfuse3.StatvfsData()
            for field in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail"):
                setattr(result, field, getattr(backing, field))
            result.f_namemax = 255
            return result

        async def forget(self, inode_list):
            return

    async def control_server():
        async def client(stream):
            line = b""
            while not line.endswith(b"\n"):
                chunk = await stream.receive_some(4096)
                if not chunk:
                    return
                line += chunk
            words = line.decode().split()
            if words and words[0] == "cut":
                lost = fs.cut(int(words[1]) if len(words) > 1 else None)
                reply = {"lost": lost, **fs.stats()}
            elif words and words[0] == "stats":
                reply = fs.stats()
            else:
                reply = {"error": "unknown command"}
            await stream.send_all((json.dumps(reply) + "\n").encode())
            await stream.aclose()

        if os.path.exists(control):
            os.unlink(control)
        sock = trio.socket.socket(trio.socket.AF_UNIX)
        await sock.bind(control)
        sock.listen(16)
        await trio.serve_listeners(client, [trio.SocketListener(sock)])

    async def run():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(control_server)
            await pyfuse3.main()
            nursery.cancel_scope.cancel()

    options = set(pyfuse3.default_options)
    options.add("fsname=powerlossfs")
    options.discard("default_permissions")
    pyfuse3.init(Operations(), mountpoint, options)
    try:
        trio.run(run)
    finally:
        pyfuse3.close(unmount=True)


def control(socket_path, words):
    import socket
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(socket_path)
    connection.sendall((" ".join(words) + "\n").encode())
    reply = b""
    while True:
        chunk = connection.recv(4096)
        if not chunk:
            break
        reply += chunk
    sys.stdout.write(reply.decode())
    return 0 if b"error" not in reply else 1


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "mount":
        serve(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) >= 4 and sys.argv[1] == "ctl":
        sys.exit(control(sys.argv[2], sys.argv[3:]))
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
