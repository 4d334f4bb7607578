import Foundation
import Testing

/// Issue 41, point 1: versions an older release kept as whole files under
/// HOME/versions/FOLDER-ID/ are taken into the versions store once, at start: `history` lists
/// them, `restore` brings them back, and the old tree is gone.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct KeptFolderImportE2ETests {
    @Test func theOldKeptTreeIsTakenIntoTheStoreAtStart() throws {
        let pair = try FolderRoleTests.Pair(files: ["notes.txt": "now"])
        defer { pair.stop() }
        let status = try VersionsTests.json(pair.env, pair.alice, ["status"])
        let folderID = try #require(((status["folders"] as? [[String: Any]])?.first)?["folder"] as? String, "\(status)")
        #expect(pair.alice.stop() == 0)

        // What the old keeper left: two versions of notes.txt (the second under a taken
        // name) and one of a file under a directory, with their mtimes.
        let tree = pair.alice.home + "/versions/" + folderID
        try FileManager.default.createDirectory(atPath: tree + "/old", withIntermediateDirectories: true)
        let kept = ["notes.sync-conflict-20231114-221320-ABCDEFG.txt": "first text",
                    "notes.sync-conflict-20231114-221320-ABCDEFG (1).txt": "second text",
                    "old/draft.sync-conflict-20231114-221320-ABCDEFG.md": "a draft"]
        for (name, text) in kept {
            try text.write(toFile: tree + "/" + name, atomically: false, encoding: .utf8)
            try TestFiles.setMtime(tree + "/" + name, 1_700_000_000_000_000_000)
        }

        let alice = try FolderSyncTests.Trio.daemon(pair.env, "alice", environment: FolderSyncTests.environment,
                                                     home: pair.alice.home, listen: pair.alice.address)
        defer { alice.stop() }
        var versions: [[String: Any]] = []
        try FolderSyncTests.eventually("history lists the imported versions", timeout: 20) {
            let history = try? VersionsTests.json(pair.env, alice, ["history", pair.aliceFolder])
            versions = ((history?["versions"] as? [[String: Any]]) ?? []).filter { $0["reason"] as? String == "imported" }
            return versions.count == 3
        }
        #expect(versions.map { $0["path"] as? String ?? "" }.sorted() == ["notes.txt", "notes.txt", "old/draft.md"], "\(versions)")
        #expect(versions.allSatisfy {
            $0["local"] as? Bool == true && $0["held"] as? Bool == true && $0["changedBy"] as? String == "ABCDEFG"
                && $0["mtime"] as? Int == 1_700_000_000_000
        }, "\(versions)")
        #expect(!FileManager.default.fileExists(atPath: tree), "the old tree is gone once taken in")

        // Each comes back as it was kept.
        for version in versions {
            let id = try #require(version["id"] as? String)
            let path = try #require(version["path"] as? String)
            let target = pair.env.home("restored-" + id)
            _ = try VersionsTests.json(pair.env, alice, ["restore", pair.aliceFolder + "/" + path, "--version", id, "--to", target])
            let text = try String(contentsOfFile: target, encoding: .utf8)
            #expect(version["size"] as? Int == text.utf8.count && kept.values.contains(text), "\(path): \(text)")
        }
    }
}
