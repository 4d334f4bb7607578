import Foundation
import Glibc
import PeerNet
import Testing

@Suite struct HomeLockTests {
    @Test func aSecondAcquireFailsNamingTheHolder() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/lock"
            let lock = try HomeLock.acquire(path: path)
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "\(getpid())\n")
            let error = netError { try HomeLock.acquire(path: path) }
            #expect(error == .system(operation: "lock \(path)",
                                     reason: "another syncpeer daemon (pid \(getpid())) is running on this home"))
            #expect(error?.description == "lock \(path) failed: another syncpeer daemon (pid \(getpid())) is running on this home")
            lock.release()
            lock.release()
            let again = try HomeLock.acquire(path: path)
            again.release()
        }
    }

    @Test func deinitReleasesAndTheFileIsPrivate() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/lock"
            do {
                let lock = try HomeLock.acquire(path: path)
                _ = lock
            }
            let lock = try HomeLock.acquire(path: path)
            defer { lock.release() }
            var info = stat()
            #expect(stat(path, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o600)
        }
    }

    @Test func aLeftoverLockFileDoesNotBlock() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/lock"
            try "99999\n".write(toFile: path, atomically: false, encoding: .utf8)  // a crashed daemon's
            let lock = try HomeLock.acquire(path: path)
            defer { lock.release() }
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "\(getpid())\n")
        }
    }

    /// Another process sees the lock: `/usr/bin/flock -n` fails while it is held.
    @Test func anotherProcessIsLockedOut() throws {
        let flock = "/usr/bin/flock"
        guard FileManager.default.isExecutableFile(atPath: flock) else {
            print("skipping: \(flock) is not installed")
            return
        }
        try withTemporaryDirectory { dir in
            let path = dir + "/lock"
            func tryLockInChild() throws -> Int32 {
                let child = Process()
                child.executableURL = URL(fileURLWithPath: flock)
                child.arguments = ["-n", "-E", "75", path, "/bin/true"]
                try child.run()
                child.waitUntilExit()
                return child.terminationStatus
            }
            let lock = try HomeLock.acquire(path: path)
            #expect(try tryLockInChild() == 75)
            lock.release()
            #expect(try tryLockInChild() == 0)
        }
    }
}
