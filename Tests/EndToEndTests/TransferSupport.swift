import Foundation
import Glibc
import PeerCrypto
import Testing

/// Files for transfer tests: random content, and a streaming BLAKE2b to compare them.
enum TestFiles {
    /// Writes `size` random bytes (from the kernel) to `path`.
    static func random(_ path: String, size: Int, mode: mode_t = 0o640, mtime: Int64? = 1_600_000_000_123_456_789) throws {
        let input = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/dev/urandom"))
        defer { try? input.close() }
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        var left = size
        while left > 0 {
            let block = try input.read(upToCount: min(left, 4 << 20)) ?? Data()
            try output.write(contentsOf: block)
            left -= block.count
        }
        try output.close()
        chmod(path, mode)
        if let mtime { try setMtime(path, mtime) }
    }

    static func setMtime(_ path: String, _ nanoseconds: Int64) throws {
        var times = [timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000)),
                     timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))]
        guard utimensat(AT_FDCWD, path, &times, 0) == 0 else { throw POSIXError(.EIO) }
    }

    /// BLAKE2b-256 of a file's content, read in blocks.
    static func hash(_ path: String) throws -> String {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        var hasher = BLAKE2b.Hasher(length: 32)
        while let block = try handle.read(upToCount: 4 << 20), !block.isEmpty {
            hasher.update([UInt8](block))
        }
        return hex(hasher.finalize())
    }

    struct Meta: Equatable, CustomStringConvertible {
        let size: Int64
        let mode: UInt32
        let mtime: Int64
        var description: String { "size \(size) mode \(String(mode, radix: 8)) mtime \(mtime)" }
    }

    static func meta(_ path: String) throws -> Meta {
        var st = stat()
        guard stat(path, &st) == 0 else { throw POSIXError(.ENOENT) }
        return Meta(size: Int64(st.st_size), mode: UInt32(st.st_mode) & 0o7777,
                    mtime: Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec))
    }

    /// Asserts that `received` has the same bytes, mode and mtime as `sent`.
    static func expectSame(_ sent: String, _ received: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try hash(sent) == hash(received), "content of \(received)", sourceLocation: sourceLocation)
        #expect(try meta(sent) == meta(received), "metadata of \(received)", sourceLocation: sourceLocation)
    }
}

extension Dictionary where Key == String, Value == Any {
    var int64: (String) -> Int64? { { (self[$0] as? NSNumber)?.int64Value } }
}

/// Two paired daemons (alice sends, bob receives into `inbox`) for transfer tests.
struct TransferPair {
    let env: SyncpeerRunner
    var alice: DaemonProcess
    var bob: DaemonProcess
    let inbox: String
    let outbox: String

    init(bobArguments: [String] = ["--auto-accept"], inbox: String? = nil, environment: [String: String] = [:]) throws {
        env = try SyncpeerRunner()
        self.inbox = inbox ?? env.home("inbox")
        outbox = env.home("outbox")
        try FileManager.default.createDirectory(atPath: self.inbox, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: true)
        alice = try DaemonProcess(env, name: "alice", environment: environment)
        bob = try DaemonProcess(env, name: "bob", arguments: ["--receive-dir", self.inbox] + bobArguments, environment: environment)
        _ = try env.pair(alice, bob, autoAccepted: bobArguments.contains("--auto-accept"))
        try alice.waitForState("connected", peer: "bob")
        try bob.waitForState("connected", peer: "alice")
    }

    func restartBob(arguments: [String] = ["--auto-accept"], environment: [String: String] = [:]) throws -> DaemonProcess {
        try DaemonProcess(env, name: "bob", home: bob.home, arguments: ["--receive-dir", inbox] + arguments, environment: environment)
    }

    func send(_ path: String, extra: [String] = [], stdin: String? = nil) throws -> SyncpeerRunner.Result {
        try env.cli(alice, ["send", path, "--to", "bob", "--json"] + extra, stdin: stdin)
    }

    /// The last JSON line of a command's output (the final result).
    static func result(_ output: String) -> [String: Any]? {
        output.split(separator: "\n").last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }
}
