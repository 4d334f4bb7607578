import Glibc

/// Bit rot, as a test makes it: a byte flipped in place with the file's mtime put back, so
/// that its size, mtime and inode are what a scan recorded (a failing disk, or a program that
/// wrote in place and restored the time).
public enum DiskRot {
    /// Flips bits of the byte at `offset` of `path` (xor `mask`) and restores the mtime;
    /// false if any step failed or the stamp did not come back.
    public static func flip(_ path: String, at offset: Int, mask: UInt8 = 0x40) -> Bool {
        var before = stat()
        guard stat(path, &before) == 0 else { return false }
        let fd = open(path, O_RDWR)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var byte: UInt8 = 0
        guard pread(fd, &byte, 1, off_t(offset)) == 1 else { return false }
        byte ^= mask
        var times = [before.st_atim, before.st_mtim]
        guard pwrite(fd, &byte, 1, off_t(offset)) == 1, futimens(fd, &times) == 0 else { return false }
        var after = stat()
        return fstat(fd, &after) == 0 && after.st_size == before.st_size && after.st_ino == before.st_ino
            && after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec
    }
}
