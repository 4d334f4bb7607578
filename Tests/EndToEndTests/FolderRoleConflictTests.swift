import Foundation
import Testing

/// Issue 41, "roles hold in both directions with conflicts", for receive-only (send-only has
/// its conflict in FolderRoleTests): bob is receive-only towards alice and both edit the same
/// files at once. Whichever edit wins on bob, alice never gets bob's content (neither at
/// its path nor as a conflict copy), and bob loses neither.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct FolderRoleConflictTests {
    typealias Pair = FolderRoleTests.Pair

    @Test func receiveOnlyHoldsThroughConcurrentEditsBothWays() throws {
        let pair = try Pair(files: ["a.txt": "a1", "b.txt": "b1", "m.txt": "m1"])
        defer { pair.stop() }
        let (bob, here, there) = (pair.bob, pair.aliceFolder, pair.bobFolder)
        let set = try pair.env.cli(bob, ["role", there, "alice", "receive-only"])
        try #require(set.status == 0, "\(set.stderr)")

        // Bob edits a.txt (older) and b.txt (newer) than alice's concurrent edits of them.
        let old: Int64 = 1_700_000_000_000_000_000
        try pair.write(there, "a.txt", "bob's a", mtime: old)
        try pair.write(there, "b.txt", "bob's b")
        try FolderSyncTests.eventually("bob lists his edits") {
            let changes = (try? pair.changes(bob, there)) ?? [:]
            return changes["a.txt"] == "locally-changed" && changes["b.txt"] == "locally-changed"
        }
        try pair.write(here, "a.txt", "alice's a")
        try pair.write(here, "b.txt", "alice's b", mtime: old + 1_000_000_000)

        // On bob: alice's newer a.txt wins, his edit kept beside it as a conflict copy; his
        // newer b.txt stays.
        try FolderSyncTests.eventually("alice's a.txt wins on bob, his edit kept as a copy", timeout: 45) {
            pair.text(there, "a.txt") == "alice's a"
                && pair.names(there).contains { $0.contains(".sync-conflict-") && pair.text(there, $0) == "bob's a" }
        }
        #expect(pair.text(there, "b.txt") == "bob's b")
        // A marker of alice's reaches bob: by then bob's answer to her edits is in, and what
        // bob would have sent her has had the time it takes.
        try pair.write(here, "m.txt", "m2")
        try FolderSyncTests.eventually("alice's marker on bob") { pair.text(there, "m.txt") == "m2" }
        Thread.sleep(forTimeInterval: 3)
        #expect(pair.names(here) == ["a.txt", "b.txt", "m.txt"], "bob's content or conflict copy reached alice: \(pair.names(here))")
        #expect(pair.text(here, "a.txt") == "alice's a" && pair.text(here, "b.txt") == "alice's b")
        let changes = try pair.changes(bob, there)
        #expect(changes["b.txt"] == "locally-changed", "\(changes)")
    }
}
