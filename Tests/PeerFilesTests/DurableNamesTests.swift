import Foundation
import Glibc
import PeerFiles
import Testing

/// `DurableNames` on real directories (what survives a power cut is the power-loss tests'
/// business: `Tests/EndToEndTests/PowerLossTests.swift`).
struct DurableNamesTests {
    func temporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "durable-names-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return path
    }

    @Test func createsMissingParentsAndAcceptsAnExistingDirectory() throws {
        let base = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: base) }
        try DurableNames.createDirectories(base + "/a/b/home", mode: 0o700)
        var st = stat()
        #expect(stat(base + "/a/b/home", &st) == 0 && st.st_mode & S_IFMT == S_IFDIR)
        #expect(st.st_mode & 0o077 == 0, "the last one gets the mode asked for (less the umask)")
        #expect(stat(base + "/a", &st) == 0 && st.st_mode & 0o700 == 0o700, "parents: 0755 less the umask")
        try DurableNames.createDirectories(base + "/a/b/home", mode: 0o700)   // exists: fine
    }

    @Test func aFileInTheWayIsAnError() throws {
        let base = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: base) }
        _ = FileManager.default.createFile(atPath: base + "/file", contents: Data("x".utf8))
        #expect(throws: FileError.self) { try DurableNames.createDirectories(base + "/file/below") }
        #expect(throws: FileError.self) { try DurableNames.createDirectories(base + "/file") }
    }

    @Test func syncfsIsABarrierOnALocalFileSystem() throws {
        let fd = open(NSTemporaryDirectory(), O_RDONLY | O_DIRECTORY)
        defer { close(fd) }
        #expect(DurableNames.syncfsIsBarrier(fd))
    }
}
