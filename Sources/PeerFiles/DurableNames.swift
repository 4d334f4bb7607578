internal import Glibc

/// Names that survive a power cut: a new entry (a file, a directory) is durable only once the
/// directory holding it is fsynced (POSIX; ext4 promises no more), and `syncfs` is a barrier
/// only where the file system honours it.
///
/// Found by the power-loss tests (`Tests/EndToEndTests/PowerLossTests.swift`): a home, receive
/// folder or folder made with `mkdir` and never synced vanished at a cut with everything
/// inside it (a new identity, forgotten shares); and on a FUSE file system every `syncfs`
/// barrier was a no-op: the kernel forwards `syncfs` to virtiofs alone, so the data of a batch
/// "made durable" by it was still only in the server's cache.
package enum DurableNames {
    /// `FUSE_SUPER_MAGIC` (statfs `f_type` of a FUSE file system).
    static let fuseMagic = 0x6573_5546

    /// Whether `syncfs` on the file system holding `fd` makes its data and names durable:
    /// false on FUSE (sshfs, rclone, … and the power-loss tests' file system), where the kernel
    /// only writes back its dirty pages and never asks the server to sync. There, every file
    /// and directory must be fsynced itself. An unknown file system counts as honouring it.
    package static func syncfsIsBarrier(_ fd: Int32) -> Bool {
        // struct statfs begins with `f_type` (a long) on Linux; the Glibc module lacks it.
        let info = UnsafeMutableRawPointer.allocate(byteCount: 512, alignment: 16)
        defer { info.deallocate() }
        guard durableNamesFstatfs(fd, info) == 0 else { return true }
        return info.load(as: Int.self) != fuseMagic
    }

    /// fsync of the directory at `path` (its entries become durable); false when it cannot be.
    @discardableResult
    package static func syncDirectory(_ path: String) -> Bool {
        let fd = open(path.isEmpty ? "/" : path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return fsync(fd) == 0
    }

    /// Creates the directory `path` (mode `mode`, before umask; 0755 for parents) and any
    /// missing parents, like `mkdir -p`, and fsyncs the directory above each one it made, so that the new names
    /// survive a power cut. An existing directory is fine; anything else there is an error.
    package static func createDirectories(_ path: String, mode: UInt32 = 0o755) throws(FileError) {
        let absolute = path.hasPrefix("/")
        let components = path.split(separator: "/").map(String.init)
        var current = absolute ? "" : "."
        for (position, component) in components.enumerated() {
            let parent = current
            current = current + "/" + component
            if mkdir(current, position == components.count - 1 ? mode_t(mode) : 0o755) == 0 {
                guard syncDirectory(parent) else { throw FileError.system("fsync directory", path: parent, errno: errno) }
                continue
            }
            let code = errno
            var st = stat()
            guard code == EEXIST, stat(current, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else {
                throw FileError.system("create directory", path: current, errno: code == EEXIST ? ENOTDIR : code)
            }
        }
    }
}

/// fstatfs(2), which the Glibc module does not export.
@_silgen_name("fstatfs") private func durableNamesFstatfs(_ fd: Int32, _ buffer: UnsafeMutableRawPointer) -> Int32
