import Foundation
import Glibc
import PeerIndex
import PeerModel
import Testing
@testable import SyncEngine

/// What a pull of a new tree leaves on the receiver: every file with the permission bits its
/// peer has (temporaries are made with them, and set only where the umask took some away),
/// and every folder made recorded with the inode it has on disk (folders' records are
/// written together, read through the handle the pull resolved).
struct PulledTreeTests {
    static func mode(_ path: String) -> UInt32? {
        var st = stat()
        return lstat(path, &st) == 0 ? UInt32(st.st_mode & 0o7777) : nil
    }

    static func inode(_ path: String) -> UInt64? {
        var st = stat()
        return lstat(path, &st) == 0 ? UInt64(st.st_ino) : nil
    }

    @Test func aNewTreeArrivesWithEachModeAndEveryFolderRecordedWithItsInode() throws {
        let pair = try TransferPair()
        defer { pair.cleanup() }
        let docs = pair.alice.directory + "/docs"
        // Modes the umask (022 or 077) would change at creation, and ones without the owner's write.
        let files: [(String, mode_t)] = [("a/plain.txt", 0o644), ("a/b/private.txt", 0o600), ("a/b/run.sh", 0o755),
                                         ("c/read-only.txt", 0o444), ("c/d/e/shared.txt", 0o666), ("top.txt", 0o640)]
        let folders: [(String, mode_t)] = [("a", 0o755), ("a/b", 0o700), ("c", 0o755), ("c/d", 0o750), ("c/d/e", 0o755)]
        for (folder, _) in folders { try FileManager.default.createDirectory(atPath: docs + "/" + folder, withIntermediateDirectories: true) }
        for (n, (file, mode)) in files.enumerated() {
            try TransferPair.randomFile(docs + "/" + file, size: 1_000 + n * 70_000, seed: UInt64(n + 1))
            #expect(chmod(docs + "/" + file, mode) == 0)
        }
        for (folder, mode) in folders { #expect(chmod(docs + "/" + folder, mode) == 0) }
        pair.connect()
        let shared = try pair.alice.folders.share(directory: docs, with: [(pair.bob.deviceKey, "bob")])
        let received = pair.bob.directory + "/docs"
        try TransferPair.eventually("bob holds every file with its mode") {
            files.allSatisfy { FileManager.default.contentsEqual(atPath: docs + "/" + $0.0, andPath: received + "/" + $0.0)
                && Self.mode(received + "/" + $0.0) == UInt32($0.1) }
        }
        for (folder, mode) in folders { #expect(Self.mode(received + "/" + folder) == UInt32(mode), "\(folder)") }
        let bobFolder = try #require(try pair.bob.index.folders().first { $0.id == shared.folder })
        try TransferPair.eventually("every folder is recorded with its inode") {
            folders.allSatisfy { folder, _ in
                let record = try? pair.bob.index.file(folderID: bobFolder.id, path: folder)
                return record?.kind == .directory && record?.inode != nil && record?.inode == Self.inode(received + "/" + folder)
            }
        }
        #expect(pair.bob.events.errors.isEmpty, "\(pair.bob.events.errors)")
        // No temporary is left behind.
        let left = FileManager.default.enumerator(atPath: received)?.allObjects.compactMap { $0 as? String }.filter { $0.hasSuffix(".syncpeer-tmp") }
        #expect(left == [])
    }
}
