import Foundation
import Glibc
import Synchronization
import Testing

/// The programs in examples/ (they use only the public `Syncpeer` API), two processes each
/// on loopback, as examples/README.md says to run them in two terminals.
@Suite(.serialized)
struct ExamplesTests {
    /// An example as a process: standard input written by the test, output read as it comes.
    final class Example {
        let process = Process()
        let input = Pipe()
        private let output = Pipe()
        private let collected = Lines()

        init(_ name: String, _ arguments: [String]) throws {
            let binary = URL(fileURLWithPath: SyncpeerRunner.binary).deletingLastPathComponent().appendingPathComponent(name)
            process.executableURL = binary
            process.arguments = arguments
            process.environment = ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory(), "SYNCPEER_INTERFACE": "lo"]
            process.standardInput = input
            process.standardOutput = output
            process.standardError = output
            let collected = self.collected
            output.fileHandleForReading.readabilityHandler = { collected.append($0.availableData) }
            try process.run()
        }

        var text: String { collected.text }

        /// Waits until the output holds `needle` (false when the time ran out or the process ended first).
        @discardableResult
        func waitFor(_ needle: String, timeout: Double = 30) -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if text.contains(needle) { return true }
                if !process.isRunning { break }
                Thread.sleep(forTimeInterval: 0.05)
            }
            return text.contains(needle)
        }

        func type(_ line: String) { input.fileHandleForWriting.write(Data((line + "\n").utf8)) }

        func stop() {
            try? input.fileHandleForWriting.close()
            if process.isRunning { kill(process.processIdentifier, SIGTERM) }
            process.waitUntilExit()
            output.fileHandleForReading.readabilityHandler = nil
        }
    }

    final class Lines: Sendable {
        private let data = Mutex(Data())
        func append(_ more: Data) { data.withLock { $0.append(more) } }
        var text: String { data.withLock { String(decoding: $0, as: UTF8.self) } }
    }

    /// A port nobody listens on now (bound, read, released).
    static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        try #require(bound, "cannot find a free port")
        return UInt16(bigEndian: address.sin_port)
    }

    @Test func chatLinesGoBothWays() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let port = try Self.freePort()
        let bob = try Example("syncpeer-chat", ["--home", env.home("bob"), "--name", "bob", "--listen", "127.0.0.1:\(port)"])
        defer { bob.stop() }
        #expect(bob.waitFor("listening on 127.0.0.1:\(port) as bob"), "\(bob.text)")
        let alice = try Example("syncpeer-chat", ["--home", env.home("alice"), "--name", "alice", "--connect", "127.0.0.1:\(port)"])
        defer { alice.stop() }
        #expect(alice.waitFor("* connected to bob"), "\(alice.text)")
        #expect(bob.waitFor("* invitation from alice (chat), code"), "\(bob.text)")
        alice.type("hello from alice")
        #expect(bob.waitFor("alice: hello from alice"), "\(bob.text)")
        bob.type("hi alice")
        #expect(alice.waitFor("bob: hi alice"), "\(alice.text)")
    }

    @Test func dropPutsAFileOnThePeerWithAProgressBar() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let inbox = env.home("inbox")
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        let source = env.home("photo.jpg")
        try TestFiles.random(source, size: 6_000_000)
        let port = try Self.freePort()
        let bob = try Example("syncpeer-drop", ["--home", env.home("bob"), "--name", "bob", "--listen", "127.0.0.1:\(port)", "--dir", inbox])
        defer { bob.stop() }
        #expect(bob.waitFor("listening on"), "\(bob.text)")
        let alice = try Example("syncpeer-drop", ["--home", env.home("alice"), "--name", "alice", "--connect", "127.0.0.1:\(port)", "--send", source])
        defer { alice.stop() }
        let deadline = Date().addingTimeInterval(60)
        while alice.process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        try #require(!alice.process.isRunning, "the sender did not finish: \(alice.text)")
        #expect(alice.process.terminationStatus == 0, "\(alice.text)")
        #expect(alice.text.contains("100% sent photo.jpg to bob"), "\(alice.text)")
        #expect(bob.waitFor("received photo.jpg"), "\(bob.text)")
        try TestFiles.expectSame(source, inbox + "/photo.jpg")
    }

    @Test func mirrorKeepsAFolderInSync() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let notes = env.home("notes"), mirror = env.home("mirror")
        try FileManager.default.createDirectory(atPath: notes, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: mirror, withIntermediateDirectories: true)
        try "first".write(toFile: notes + "/one.txt", atomically: true, encoding: .utf8)
        let port = try Self.freePort()
        let bob = try Example("syncpeer-mirror", ["--home", env.home("bob"), "--name", "bob", "--listen", "127.0.0.1:\(port)", "--dir", mirror])
        defer { bob.stop() }
        #expect(bob.waitFor("listening on"), "\(bob.text)")
        let alice = try Example("syncpeer-mirror", ["--home", env.home("alice"), "--name", "alice", "--connect", "127.0.0.1:\(port)", "--dir", notes])
        defer { alice.stop() }
        #expect(alice.waitFor("sharing \(notes) with bob"), "\(alice.text)")
        #expect(bob.waitFor("alice shares notes: accepted"), "\(bob.text)")
        func eventually(_ what: String, _ condition: () -> Bool) {
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline, !condition() { Thread.sleep(forTimeInterval: 0.1) }
            #expect(condition(), "\(what): \(bob.text)")
        }
        eventually("one.txt mirrored") { (try? String(contentsOfFile: mirror + "/one.txt", encoding: .utf8)) == "first" }
        try "second".write(toFile: notes + "/two.txt", atomically: true, encoding: .utf8)
        eventually("a later file follows") { (try? String(contentsOfFile: mirror + "/two.txt", encoding: .utf8)) == "second" }
    }
}
