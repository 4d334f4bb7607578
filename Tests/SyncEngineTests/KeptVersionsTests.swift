import Foundation
import Glibc
import Testing
@testable import SyncEngine

/// Versions dropped by `resolve` are moved under the home, never deleted nor replaced.
@Suite struct KeptVersionsTests {
    static func directory(in parent: String = NSTemporaryDirectory()) throws -> String {
        let dir = parent + "/kept-versions-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir + "/sub", withIntermediateDirectories: true)
        return dir
    }

    static func keepTwice(folder: String, home: String, folderID: String) throws -> [String] {
        let store = KeptVersions(root: home + "/versions")
        var kept: [String] = []
        for text in ["first", "second"] {
            try text.write(toFile: folder + "/sub/notes.txt", atomically: false, encoding: .utf8)
            kept.append(try store.keep(folder + "/sub/notes.txt", folderID: folderID, relative: "sub/notes.txt",
                                       author: "ABCDEFG", mtimeNs: 1_700_000_000_000_000_000))
            #expect(!FileManager.default.fileExists(atPath: folder + "/sub/notes.txt"))
        }
        return kept
    }

    @Test func aVersionIsMovedUnderItsFolderNamedByTimeAndAuthorAndNeverReplaced() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let kept = try Self.keepTwice(folder: dir, home: dir + "/home", folderID: "abcde-fghij")
        #expect(kept == [dir + "/home/versions/abcde-fghij/sub/notes.sync-conflict-20231114-221320-ABCDEFG.txt",
                         dir + "/home/versions/abcde-fghij/sub/notes.sync-conflict-20231114-221320-ABCDEFG (1).txt"])
        #expect(try kept.map { try String(contentsOfFile: $0, encoding: .utf8) } == ["first", "second"])
        var info = stat()
        #expect(stat(dir + "/home/versions/abcde-fghij", &info) == 0 && info.st_mode & 0o777 == 0o700)
    }

    @Test func aFolderIDThatIsNotAPlainNameStaysOneComponent() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let kept = try Self.keepTwice(folder: dir, home: dir + "/home", folderID: "../../escape")
        #expect(kept.allSatisfy { $0.hasPrefix(dir + "/home/versions/id-") && !$0.contains("..") }, "\(kept)")
    }

    /// /dev/shm is another file system than the temporary directory here: copied, then removed.
    @Test(.enabled(if: KeptVersionsTests.shmIsAnotherFileSystem()))
    func acrossFileSystemsTheVersionIsCopiedThenRemoved() throws {
        let folder = try Self.directory(in: "/dev/shm")
        let home = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: folder); try? FileManager.default.removeItem(atPath: home) }
        let kept = try Self.keepTwice(folder: folder, home: home, folderID: "abcde-fghij")
        #expect(try kept.map { try String(contentsOfFile: $0, encoding: .utf8) } == ["first", "second"])
    }

    static func shmIsAnotherFileSystem() -> Bool {
        var a = stat(), b = stat()
        return stat("/dev/shm", &a) == 0 && stat(NSTemporaryDirectory(), &b) == 0 && a.st_dev != b.st_dev
    }
}
