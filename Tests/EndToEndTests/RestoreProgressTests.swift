import Foundation
import Testing

/// Issue 41, point 2: a restore whose chunks are only on a peer fetches them from it (several
/// requests in flight, `RestoreFetchTests`), verified, and shows its progress over the whole
/// tree: `--json` prints `transfer` events before the result.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct RestoreProgressTests {
    @Test func aDeletedTreeOfSeveralMiBIsRestoredFromThePeerWithProgress() throws {
        let pair = try FolderRoleTests.Pair(files: ["keep.txt": "k"])
        defer { pair.stop() }
        let (env, alice, here, there) = (pair.env, pair.alice, pair.aliceFolder, pair.bobFolder)
        try FileManager.default.createDirectory(atPath: here + "/project/sub", withIntermediateDirectories: true)
        try TestFiles.random(here + "/project/sub/big.bin", size: 6 << 20)
        try "plan\n".write(toFile: here + "/project/plan.txt", atomically: true, encoding: .utf8)
        let big = try #require(VersionsTests.bytes(here + "/project/sub/big.bin"))
        try FolderSyncTests.eventually("the tree reaches bob", timeout: 60) {
            VersionsTests.bytes(there + "/project/sub/big.bin") == big && pair.text(there, "project/plan.txt") == "plan\n"
        }

        // Deleted on alice: gone here (her store holds none of it), kept by bob as he applies it.
        Thread.sleep(forTimeInterval: 1.1)
        let beforeDeletion = ISO8601DateFormatter().string(from: Date())
        try FileManager.default.removeItem(atPath: here + "/project")
        try FolderSyncTests.eventually("the deletion reaches bob", timeout: 45) {
            !FileManager.default.fileExists(atPath: there + "/project")
        }

        let result = try env.cli(alice, ["restore", here + "/project", "--at", beforeDeletion, "--json"])
        try #require(result.status == 0, "\(result.stderr)")
        let lines = try result.stdout.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
        }
        let events = lines.filter { $0["event"] as? String == "transfer" }
        let answer = try #require(lines.last)
        let total = (6 << 20) + 5
        let restored = answer["restored"] as? [[String: Any]] ?? []
        #expect(restored.count == 2 && (answer["failed"] as? [Any])?.isEmpty == true, "\(answer)")
        let bobID = String(try pair.bob.deviceID(env).prefix(7))
        #expect(restored.allSatisfy { $0["from"] as? String == bobID }, "every chunk came from bob: \(restored)")
        #expect(VersionsTests.bytes(here + "/project/sub/big.bin") == big && pair.text(here, "project/plan.txt") == "plan\n")

        // Progress over the tree: from the start to the whole, never back, then completed.
        try #require(events.count >= 2, "\(result.stdout)")
        let bytes = events.map { $0["bytes"] as? Int ?? -1 }
        #expect(bytes.first == 0 && zip(bytes, bytes.dropFirst()).allSatisfy { $0 <= $1 }, "\(bytes)")
        #expect(events.allSatisfy { $0["name"] as? String == "project" && $0["total"] as? Int == total && $0["files"] as? Int == 2 },
                "\(events)")
        #expect(events.last?["state"] as? String == "completed" && bytes.last == total, "\(events.last ?? [:])")
        #expect(events.dropLast().allSatisfy { $0["state"] as? String == "active" })

        // On a terminal: one live line for the whole restore, cleared before the result.
        let copy = env.home("copy")
        let terminal = try PseudoTerminal(["--home", alice.home, "restore", here + "/project", "--at", beforeDeletion, "--to", copy],
                                          environment: ["PATH": "/usr/bin:/bin", "HOME": env.root.path, "SYNCPEER_INTERFACE": "lo",
                                                        "TERM": "xterm"], columns: 200)
        #expect(terminal.wait() == 0)
        let frames = PseudoTerminal.frames(terminal.raw)
        #expect(frames.contains { $0.hasPrefix("restoring project: ") && $0.contains("of 6.3 MB, 2 file(s)") }, "\(frames)")
        #expect(frames.contains { $0.hasPrefix("restored " + copy + "/sub/big.bin") }, "\(frames)")
        #expect(VersionsTests.bytes(copy + "/sub/big.bin") == big)
    }
}
