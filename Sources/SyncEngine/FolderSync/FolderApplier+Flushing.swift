#if canImport(Glibc)
internal import PeerModel
internal import Glibc
#endif
internal import Dispatch
internal import Synchronization
internal import PeerFiles

/// A sealed batch on its way to the disk: its temporaries closed, given their mode and mtime
/// and made durable on the applier's `flusher`, while `io` prepares the next batch.
extension FolderApplier {
    /// A sealed batch: its fetches end, then `flusher` closes and flushes its temporaries
    /// (`flush`); `io` takes what came out (`outcome`) only after waiting for `done`.
    /// Checked `Sendable`: its items are values, and what `flusher` makes of them is handed
    /// over once, through a lock, as a value.
    final class Flushing: Sendable {
        let items: [Pending]
        /// Made durable file by file (`syncsPerFile`), not by `syncfs`.
        let perFile: Bool
        let done = DispatchGroup()
        /// Set by `flush` (on `flusher`) before `done` is left.
        private let result = Mutex(Outcome())

        /// What a flush made of the batch.
        struct Outcome: Sendable {
            /// Flushed and closed, to be put in place.
            var ready: [Pending] = []
            /// Paths that cannot be placed, and why (recorded on `io` by `place`).
            var failures: [(path: String, failure: PullFailure)] = []

            /// Drops an assembled file: its temporary goes, the path keeps what it had.
            mutating func drop(_ item: Pending, _ reason: String) {
                unlinkat(item.directory.fd, item.temp, 0)
                failures.append((item.state.path, PullFailure(.unwritable, reason)))
            }
        }

        init(_ items: [Pending], perFile: Bool) {
            self.items = items
            self.perFile = perFile
        }

        var flushed: Bool { done.wait(timeout: FolderApplier.noWait) == .success }

        /// What `flush` made of the batch (on `io`, after waiting for `done`).
        var outcome: Outcome { result.withLock { $0 } }

        /// The barrier for the data of the whole batch: one `syncfs`, or an `fsync` of each
        /// file of a small batch (on `flusher`; it touches only the batch).
        func flush(root: DirectoryHandle) {
            var out = Outcome()
            for item in items {
                guard item.fd >= 0 else { out.ready.append(item); continue }
                if let failure = item.failure.value {
                    close(item.fd)
                    // Kept for the next attempt unless it can never be used.
                    if failure.failure == .unwritable { unlinkat(item.directory.fd, item.temp, 0) }
                    out.failures.append((item.state.path, failure))
                    continue
                }
                // The inode the file is recorded with (off `io`, which read it by name before),
                // and its mode: made with the wanted one (`pull`), it is set only where the
                // umask or an older temporary left another (B: one syscall and one inotify
                // event less per file).
                var st = stat()
                var ready = item
                let stated = fstat(item.fd, &st) == 0
                if stated { ready.inode = UInt64(st.st_ino) }
                let mode = mode_t(item.state.mode & 0o777)
                // Mode and mtime last: writing would change the mtime again.
                var times = [timespec(tv_sec: 0, tv_nsec: FolderApplier.utimeOmit),
                             timespec(tv_sec: Int(item.state.mtimeNs / 1_000_000_000), tv_nsec: Int(item.state.mtimeNs % 1_000_000_000))]
                let problem: String? = if !stated || st.st_mode & 0o7777 != mode, fchmod(item.fd, mode) != 0 {
                    "cannot set the permissions of its temporary file: \(FolderApplier.lastError())"
                } else if futimens(item.fd, &times) != 0 {
                    "cannot set the modification time of its temporary file: \(FolderApplier.lastError())"
                } else if perFile, fsync(item.fd) != 0 {  // fsync, not fdatasync: the mode and mtime too
                    "cannot flush its data to disk: \(FolderApplier.lastError())"
                } else { nil }
                // close() is where some file systems (NFS, FUSE) report a failed write.
                let closed = close(item.fd) == 0
                if let problem {
                    out.drop(item, problem)
                } else if !closed {
                    out.drop(item, "writing its temporary file failed: \(FolderApplier.lastError())")
                } else {
                    out.ready.append(ready)
                }
            }
            // Without the data on disk a crash could leave a torn file behind a rename.
            if !perFile, !out.ready.isEmpty, syncFileSystem(root.fd) != 0 {
                let reason = "cannot flush its data to disk: \(FolderApplier.lastError())"
                for item in out.ready { out.drop(item, reason) }
                out.ready = []
            }
            result.withLock { [out] in $0 = out }
        }
    }

    /// A batch of at most this many files is made durable file by file (`fsync` of each, and
    /// of each directory after the renames) instead of by `syncfs`: a `syncfs` waits
    /// for every dirty page of the whole file system, so a large file pulled while another
    /// program writes to the same disk would wait for that program's data too (0.47 s of
    /// 2.4 s in A-share, where it was the source file of the same run). More files than this,
    /// and one `syncfs` costs less than a device flush per file.
    static let perFileSyncLimit = 4

    /// Whether a batch of `items` files and links is made durable file by file
    /// (`perFileSyncLimit`): only while the apply has made no directory (`madeDirectories`),
    /// and always where `syncfs` is no barrier (FUSE: see `DurableNames`; each directory
    /// made was fsynced into its parent then).
    static func syncsPerFile(items: Int, madeDirectories: Bool, syncfsIsBarrier: Bool = true) -> Bool {
        !syncfsIsBarrier || (!madeDirectories && items <= perFileSyncLimit)
    }
}
