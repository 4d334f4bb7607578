import Foundation
import Glibc
import PeerFiles
import Testing
import TestKit

/// Power cuts while conflict copies are made and conflicts are resolved (issue 46): alice and
/// bob (bob's home and folder on the power-loss mount) edit the same files at once, so conflict
/// copies are made at bob (and at alice); bob's user renames and deletes files and resolves
/// conflicts (`syncpeer resolve --keep`, which moves the dropped versions to HOME/versions);
/// the power goes at seeded points. Bob's user saves durably (fsync of the file and its
/// folders), so each version either user wrote is acknowledged by a disk, and must survive:
///
/// - every version not overwritten or deleted by a user is at its path, in a conflict copy, or
///   in a home's `versions` (checked after each cut, before bob starts again, and at the end);
/// - once both converge, no version a user overwrote or deleted is back at its path in alice's
///   folder (unless it lived on elsewhere meanwhile: a copy or a rename can bring it back), and
///   every file alice's user wrote that bob's user did not rename or delete is still there (no
///   deletion or older version reached her because of bob's cuts); no temporary file is left.
///
/// `make test` runs one seed (`PowerLossTests.Mode`: its first, with its number of cuts);
/// `SYNCPEER_POWERLOSS=long` every seed of the long mode; `SYNCPEER_POWERLOSS_SEED=N` one.
@Suite(.serialized, .enabled(if: PowerLossMount.available, Comment(rawValue: PowerLossMount.unavailableReason ?? "")))
struct PowerLossConflictTests {
    /// Every version a user wrote (content hash → who wrote it where), and those a user replaced
    /// or deleted afterwards (what was at the path when the user saved over it or deleted it).
    final class Ledger {
        var written: [String: String] = [:]
        /// Where each version was written.
        var writtenAt: [String: String] = [:]
        var superseded: Set<String> = []
        /// Versions seen at another path than their own (a conflict copy, a rename, kept):
        /// one replaced at its path may live on there, and come back by a resolve.
        var escaped: Set<String> = []
        /// Paths bob's user renamed or deleted (they may legitimately be gone at alice).
        var movedByBob: Set<String> = []
        /// Paths alice's user wrote.
        var alicePaths: Set<String> = []

        /// Saves a new version of `relative` in `user`'s folder, noting what it replaced.
        func save(_ user: PowerLossTests.Alice, _ relative: String, durable: Bool, who: String) throws {
            let path = user.folder + "/" + relative
            if let old = try? TestFiles.hash(path) { superseded.insert(old) }
            try user.write(relative, size: Int.random(in: 50...3000, using: &user.rng), durable: durable)
            if let new = try? TestFiles.hash(path) {
                written[new] = "\(who) wrote \(relative)"
                writtenAt[new] = relative
            }
        }

        /// Notes the versions in `trees` (each path → `FolderSyncTests.tree` kind) that are
        /// somewhere else than where they were written; returns every version held.
        @discardableResult
        func observe(_ trees: [[String: String]]) -> Set<String> {
            var held = Set<String>()
            for tree in trees {
                for (path, kind) in tree where kind.hasPrefix("file") {
                    let hash = String(kind.split(separator: " ").last ?? "")
                    held.insert(hash)
                    if let at = writtenAt[hash], at != path { escaped.insert(hash) }
                }
            }
            return held
        }

        /// The versions that must still be somewhere.
        var live: [String: String] { written.filter { !superseded.contains($0.key) } }
    }

    static let bases = (0..<12).map { "d\($0 % 3)/f\($0).txt" }

    @Test(.serialized, arguments: PowerLossTests.Mode.conflictSeeds)
    func conflictCopiesAndResolvesSurvivePowerCuts(seed: UInt64) throws {
        let cuts = PowerLossTests.Mode.current.cuts
        print("powerloss: seed \(seed), conflicts and resolves at bob, \(cuts) cuts "
            + "(replay: SYNCPEER_POWERLOSS_SEED=\(seed) swift test --skip-build --filter PowerLossConflictTests)")
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let ledger = Ledger()
        let alice = PowerLossTests.Alice(folder: env.home("alice-docs"), seed: seed)
        for relative in Self.bases { try ledger.save(alice, relative, durable: false, who: "alice") }
        ledger.alicePaths.formUnion(Self.bases)
        let pair = try PowerLossTests.Pair(env, sharing: alice.folder)
        defer { pair.stop() }
        let aliceDaemon = pair.alice, bobHome = pair.bobHome
        let bobUser = PowerLossTests.Alice(folder: pair.bobFolder(alice.folder), seed: seed &* 31 &+ 7)
        bobUser.counter = 1_000_000   // distinct contents from alice's
        let expected = FolderSyncTests.tree(alice.folder)
        try FolderSyncTests.eventually("bob has alice's files", timeout: 60) { FolderSyncTests.tree(bobUser.folder) == expected }

        var rng = SplitMix64(seed: seed &* 6151)
        var failures: [String] = []
        var resolves = 0
        @discardableResult
        func missing() -> [String] {
            let held = ledger.observe([alice.folder, bobUser.folder, bobHome + "/versions", aliceDaemon.home + "/versions"].map(FolderSyncTests.tree))
            return ledger.live.filter { !held.contains($0.key) }.map(\.value).sorted()
        }
        for cut in 1...cuts {
            // Both save the same files at once: conflicts (bob's saves are durable).
            let both = Self.bases.shuffled(using: &rng).prefix(Int.random(in: 2...5, using: &rng))
            for relative in both {
                try ledger.save(alice, relative, durable: false, who: "alice (cut \(cut))")
                ledger.alicePaths.insert(relative)
                try ledger.save(bobUser, relative, durable: true, who: "bob (cut \(cut))")
            }
            // Bob's user renames one file and deletes another (durably).
            let present = bobUser.files.filter { !$0.contains(".sync-conflict-") }
            if let from = present.randomElement(using: &rng), Bool.random(using: &rng) {
                let to = (from as NSString).deletingLastPathComponent + "/renamed-\(cut)-" + (from as NSString).lastPathComponent
                if rename(bobUser.folder + "/" + from, bobUser.folder + "/" + to) == 0 {
                    DurableNames.syncDirectory((bobUser.folder + "/" + to as NSString).deletingLastPathComponent)
                    ledger.movedByBob.insert(from)
                }
            }
            if let gone = present.randomElement(using: &rng), Bool.random(using: &rng) {
                let path = bobUser.folder + "/" + gone
                if let old = try? TestFiles.hash(path), unlink(path) == 0 {
                    DurableNames.syncDirectory((path as NSString).deletingLastPathComponent)
                    ledger.superseded.insert(old)
                    ledger.movedByBob.insert(gone)
                }
            }
            Thread.sleep(forTimeInterval: Double.random(in: 0.5...2.5, using: &rng))
            missing()   // (notes the copies made meanwhile)
            // Bob's user settles some conflicts; the power goes soon after.
            let listed = (try? env.cli(pair.bob, ["conflicts", "--json"]).stdout) ?? ""
            let originals = listed.split(separator: "\n").compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["original"] as? String
            }
            for original in originals.shuffled(using: &rng).prefix(3) {
                let keep = ["alice", "bob", "both"].randomElement(using: &rng)!
                let result = try env.cli(pair.bob, ["resolve", original, "--keep", keep])
                if result.status == 0 { resolves += 1 } else { print("powerloss: resolve \(original) --keep \(keep): \(result.stderr)") }
            }
            missing()
            Thread.sleep(forTimeInterval: Double.random(in: 0.05...1.5, using: &rng))
            try pair.cut("seed \(seed) cut \(cut) (\(originals.count) conflicted, \(resolves) resolved so far)", using: &rng)
            for lost in missing() { failures.append("cut \(cut): a version is nowhere: \(lost)") }
            try pair.restart()
        }
        // Both converge; then nothing a cut undid shows at alice.
        let converged = (0..<900).contains { _ in
            if FolderSyncTests.tree(alice.folder) == FolderSyncTests.tree(bobUser.folder) { return true }
            Thread.sleep(forTimeInterval: 0.1)
            return false
        }
        if !converged {
            let a = FolderSyncTests.tree(alice.folder), b = FolderSyncTests.tree(bobUser.folder)
            failures.append("alice and bob did not converge: only at alice \(Set(a.keys).subtracting(b.keys).sorted().prefix(8)), "
                + "only at bob \(Set(b.keys).subtracting(a.keys).sorted().prefix(8)), "
                + "different \(a.keys.filter { b[$0] != nil && b[$0] != a[$0] }.sorted().prefix(8))")
        }
        for lost in missing() { failures.append("at the end: a version is nowhere: \(lost)") }
        let atAlice = FolderSyncTests.tree(alice.folder)
        for (path, kind) in atAlice where kind.hasPrefix("file") {
            let hash = String(kind.split(separator: " ").last ?? "")
            if ledger.superseded.contains(hash), ledger.writtenAt[hash] == path, !ledger.escaped.contains(hash) { failures.append("an overwritten or deleted version is back at alice: \(path) (\(ledger.written[hash] ?? "?"))") }
        }
        for path in ledger.alicePaths.subtracting(ledger.movedByBob) where atAlice[path] == nil {
            failures.append("\(path) is gone at alice, yet nobody deleted or renamed it")
        }
        let leftovers = (FileManager.default.enumerator(atPath: bobUser.folder)?.allObjects as? [String] ?? [])
            .filter { $0.hasSuffix(".syncpeer-tmp") || $0.contains(".syncpeer-partial") }
        if !leftovers.isEmpty { failures.append("temporary files left at bob: \(leftovers.prefix(10))") }
        let kept = FolderSyncTests.tree(bobHome + "/versions").values.filter { $0.hasPrefix("file") }.count
        print("powerloss: seed \(seed): \(ledger.written.count) versions written, \(resolves) conflicts resolved, \(kept) versions kept at bob")
        #expect(failures.isEmpty, Comment(rawValue: "seed \(seed):\n" + failures.joined(separator: "\n")))
    }
}
