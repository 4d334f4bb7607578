import Foundation
import Glibc
import PeerFiles
import Testing
import TestKit

/// Chaos: three real daemons share one folder while a seeded random mix of user edits,
/// crashes and network cuts runs for a bounded time; then everything is healed and, once the
/// nodes are quiet, the promises of a sync tool must hold:
///
/// 1. every node has the same tree (paths, kinds, contents, modes, link targets), and every
///    node's `status` says idle with both peers connected and at 100 %;
/// 2. every version anyone wrote is the current file or a conflict copy (see ``ChaosLedger``
///    for exactly which versions count);
/// 3. nothing outside the folders was touched (a sentinel tree beside them, the receive
///    folders' other entries);
/// 4. no temporary file (``IgnorePatterns/temporarySuffix``) or staged partial is left.
///
/// The ops: create, edit (atomic replace), append in place, rename, delete, make, rename and
/// delete directories, make and retarget symlinks, the same file edited on two nodes at once,
/// SIGKILL and restart of a daemon, a link refused or silently stalled, `syncpeer disconnect`.
///
/// Every run prints its seed; on failure it prints the op log and the differences. A seed
/// fixes every random choice, not the daemons' timing: where a choice depends on what has
/// synced so far (which files a node has), a replay can take another path. Modes
/// (environment variables):
/// - default (`make test`): seeds 1, 2, 3, 12 s of chaos each;
/// - `SYNCPEER_CHAOS=long` (`make chaos`): 20 seeds from 1001, 60 s each;
///   `SYNCPEER_CHAOS_COUNT`, `SYNCPEER_CHAOS_BASE` and `SYNCPEER_CHAOS_SECONDS` change that;
/// - `SYNCPEER_CHAOS_SEED=N`: only seed N (with the mode's duration), to replay a failure.
/// - `SYNCPEER_CHAOS_ARTIFACTS=DIR`: where a failed run leaves its op log and every daemon's
///   events (default /tmp/syncpeer-chaos/seed-N).
///
/// Daemons run with a 200 ms watch delay. In `make chaos` there is no periodic rescan within
/// the run (10 min), so a change must travel by the watcher and by pulls retried when peers
/// return, not by a rescan that would hide a lost event. The short runs of `make test` keep
/// the product's safety net, a periodic full rescan (every 20 s instead of hourly, to fit the
/// quiescence bound): the watcher can still miss a file a user creates in a directory the
/// node has just re-created (short seed 3, 1 run in 4: the file stayed on its node while every
/// `status` said 100 %), an open bug that `make chaos` keeps exposing.
@Suite(.serialized)
struct ChaosTests {
    struct Mode {
        let seeds: [UInt64]
        let seconds: Double
        let quiescenceBound: Double

        static let current: Mode = {
            let environment = ProcessInfo.processInfo.environment
            let long = environment["SYNCPEER_CHAOS"] == "long"
            let seconds = environment["SYNCPEER_CHAOS_SECONDS"].flatMap(Double.init) ?? (long ? 60 : 12)
            let bound = long ? 180.0 : 75.0
            if let seed = environment["SYNCPEER_CHAOS_SEED"].flatMap(UInt64.init) {
                return Mode(seeds: [seed], seconds: seconds, quiescenceBound: bound)
            }
            let count = environment["SYNCPEER_CHAOS_COUNT"].flatMap(UInt64.init) ?? (long ? 20 : 3)
            let base = environment["SYNCPEER_CHAOS_BASE"].flatMap(UInt64.init) ?? (long ? 1001 : 1)
            return Mode(seeds: Array(base..<base + count), seconds: seconds, quiescenceBound: bound)
        }()
    }

    /// `SYNCPEER_CHAOS_RESCAN_MS` sets the periodic rescan (default: 20 s in short runs, 10 min
    /// in long ones), to tell a lost watch event or an unretried pull (healed by a rescan)
    /// from other failures.
    static let environment = [
        "SYNCPEER_WATCH_DELAY_MS": "200",
        "SYNCPEER_RESCAN_MS": ProcessInfo.processInfo.environment["SYNCPEER_CHAOS_RESCAN_MS"]
            ?? (ProcessInfo.processInfo.environment["SYNCPEER_CHAOS"] == "long" ? "600000" : "20000"),
    ]

    @Test(.serialized, arguments: Mode.current.seeds)
    func chaos(seed: UInt64) throws {
        let mode = Mode.current
        let replay = "SYNCPEER_CHAOS_SEED=\(seed) SYNCPEER_CHAOS_SECONDS=\(Int(mode.seconds)) swift test --skip-build --filter ChaosTests"
        print("chaos: seed \(seed), \(Int(mode.seconds)) s of chaos (replay: \(replay))")
        let run = try ChaosRun(seed: seed)
        defer { run.cluster.shutdown() }
        var failures: [String] = []
        do {
            try run.chaos(seconds: mode.seconds)
            try run.heal()
        } catch {
            failures.append("a node could not be restarted: \(error)")
        }
        if let unrest = run.waitForQuiescence(bound: mode.quiescenceBound) {
            failures.append("not quiescent within \(Int(mode.quiescenceBound)) s after healing: \(unrest)")
        }
        failures += run.cluster.problems + run.invariantFailures()
        print("chaos: seed \(seed): \(run.log.count) ops (\(run.summary)), \(run.ledger.written.count) versions written, \(run.ledger.required.count) required; \(failures.isEmpty ? "all invariants hold" : "\(failures.count) invariant(s) FAILED")")
        guard !failures.isEmpty else { return }
        let artifacts = (ProcessInfo.processInfo.environment["SYNCPEER_CHAOS_ARTIFACTS"] ?? "/tmp/syncpeer-chaos") + "/seed-\(seed)"
        try? run.cluster.writeArtifacts(to: artifacts, log: run.log)
        let summary = "chaos seed \(seed) failed (replay: \(replay); op log and daemon events in \(artifacts)):\n"
            + failures.map { "- " + $0 }.joined(separator: "\n")
        print(summary + "\nrecent daemon errors:\n\(run.cluster.recentProblems())\nop log:\n" + run.log.joined(separator: "\n"))
        Issue.record(Comment(rawValue: summary))
    }
}

/// One seeded chaos run: the cluster, the random ops, the ledger of versions, the log.
final class ChaosRun {
    let seed: UInt64
    var rng: SplitMix64
    let cluster: ChaosCluster
    var ledger = ChaosLedger()
    private(set) var log: [String] = []
    private let started = Date()
    private var opNumber = 0
    private var counts: [String: Int] = [:]
    /// Things to undo later (a restart after a kill, a link healed after a cut).
    private var pending: [(due: Date, what: String, action: () throws -> Void)] = []
    private var sentinelBefore: [String: String] = [:]
    private var neighboursBefore: [String: [String]] = [:]

    static let fileNames = ["f0.txt", "f1.txt", "f2.txt", "f3.txt", "data.bin", "notes.md", "ünïcødé-文件.txt", "with space.txt"]
    static let directoryNames = ["d0", "d1", "d2", "sub"]

    init(seed: UInt64) throws {
        self.seed = seed
        var generator = SplitMix64(seed: seed)
        var initial: [(String, [UInt8])] = []
        for index in 0..<8 {
            let directory = index < 3 ? "" : Self.directoryNames[index % 3] + "/"
            initial.append((directory + Self.fileNames[index], Self.content(seed: seed, op: 0, node: "alice", size: 200 + index * 997, &generator)))
        }
        rng = generator
        cluster = try ChaosCluster(environment: ChaosTests.environment) { root in
            for directory in Self.directoryNames.prefix(3) {
                try FileManager.default.createDirectory(atPath: root + "/" + directory, withIntermediateDirectories: true)
            }
            for (path, bytes) in initial { _ = FileManager.default.createFile(atPath: root + "/" + path, contents: Data(bytes)) }
        }
        for (path, bytes) in initial { ledger.wrote(ChaosFolder.hash(bytes), node: "alice", path: path, op: 0) }
        sentinelBefore = FolderSyncTests.tree(cluster.sentinel)
        neighboursBefore = neighbours()
        note("setup: \(initial.count) files on alice, shared with bob and carol, carol shares with bob")
        if let unrest = waitForQuiescence(bound: 60) { throw ChaosError("the first sync did not settle: \(unrest)") }
        note("setup: first sync done")
    }

    var summary: String { counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") }

    private func note(_ text: String) {
        log.append(String(format: "%7.2fs ", Date().timeIntervalSince(started)) + text)
    }

    private func folder(_ node: String) -> ChaosFolder {
        ChaosFolder(node: node, root: cluster.folders[node]!, scratch: cluster.scratch)
    }

    // MARK: - Content

    /// Unique content: the seed, op and node first (so no two writes share a hash), then
    /// seeded bytes; mostly small, sometimes a few MiB (several blocks, slow enough to cut).
    static func content(seed: UInt64, op: Int, node: String, size: Int? = nil, _ rng: inout SplitMix64) -> [UInt8] {
        let length = size ?? {
            switch Int.random(in: 0..<20, using: &rng) {
            case 0: Int.random(in: 262_144...3_000_000, using: &rng)
            case 1...5: Int.random(in: 4096...262_144, using: &rng)
            default: Int.random(in: 0...4096, using: &rng)
            }
        }()
        var bytes = Array("chaos seed \(seed) op \(op) node \(node)\n".utf8)
        bytes.reserveCapacity(bytes.count + length + 8)
        while bytes.count < length { withUnsafeBytes(of: rng.next()) { bytes += $0 } }
        return bytes
    }

    // MARK: - The chaos phase

    func chaos(seconds: Double) throws {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            try runDue(now: Date())
            opNumber += 1
            try randomOp()
            Thread.sleep(forTimeInterval: Double(Int.random(in: 10...250, using: &rng)) / 1000)
        }
        note("chaos phase over")
    }

    private func runDue(now: Date) throws {
        let due = pending.filter { $0.due <= now }
        pending.removeAll { $0.due <= now }
        for item in due {
            note(item.what)
            try item.action()
        }
    }

    /// Undoes every cut and crash: links up, every node running (a node that disconnected a
    /// peer is restarted, the only way a disconnected pair dials again).
    func heal() throws {
        try runDue(now: .distantFuture)
        for link in cluster.links where link.state != .up {
            link.state = .up
            note("heal: link \(link.name) up")
        }
        for name in ChaosCluster.names where !cluster.isRunning(name) {
            try cluster.restart(name)
            note("heal: \(name) restarted")
        }
        note("healed")
    }

    private func count(_ kind: String) { counts[kind, default: 0] += 1 }

    private func randomOp() throws {
        let node = ChaosCluster.names.randomElement(using: &rng)!
        let roll = Int.random(in: 0..<100, using: &rng)
        switch roll {
        case 0..<18: create(node)
        case 18..<36: edit(node)
        case 36..<43: append(node)
        case 43..<51: renameFile(node)
        case 51..<59: delete(node, kind: "file")
        case 59..<63: makeDirectory(node)
        case 63..<66: renameDirectory(node)
        case 66..<68: delete(node, kind: "dir")
        case 68..<72: symlink(node)
        case 72..<80: concurrentEdit()
        case 80..<84: try kill(node)
        case 84..<93: cut()
        case 93..<95: try disconnect(node)
        default: break  // a pause: let things sync
        }
    }

    private func pick(_ node: String, _ kind: String) -> String? {
        folder(node).entries().filter { $0.value == kind }.keys.sorted().randomElement(using: &rng)
    }

    /// A path that does not exist yet: a pool name in an existing directory (or the root).
    private func freshPath(_ node: String, directory: Bool = false) -> String? {
        let entries = folder(node).entries()
        let parents = [""] + entries.filter { $0.value == "dir" }.keys.sorted()
        let parent = parents.randomElement(using: &rng)!
        let names = directory ? Self.directoryNames : Self.fileNames
        let candidates = names.map { parent.isEmpty ? $0 : parent + "/" + $0 }.filter { entries[$0] == nil }
        return candidates.randomElement(using: &rng)
    }

    private func short(_ hashes: [String]) -> String {
        hashes.isEmpty ? "nothing" : hashes.map { String($0.prefix(8)) }.joined(separator: ",")
    }

    private func writeVersion(_ node: String, _ path: String, what: String) {
        let bytes = Self.content(seed: seed, op: opNumber, node: node, &rng)
        let hash = ChaosFolder.hash(bytes)
        guard let replaced = folder(node).write(path, bytes) else {
            note("#\(opNumber) \(node) \(what) \(path): failed (errno \(errno)), nothing written")
            return
        }
        ledger.replaced(replaced, op: opNumber)
        ledger.wrote(hash, node: node, path: path, op: opNumber)
        count(what)
        note("#\(opNumber) \(node) \(what) \(path): \(bytes.count) bytes \(hash.prefix(8)), replaced \(short(replaced))")
    }

    private func create(_ node: String) {
        guard let path = freshPath(node) else { return }
        writeVersion(node, path, what: "create")
    }

    private func edit(_ node: String) {
        guard let path = pick(node, "file") else { return }
        writeVersion(node, path, what: "edit")
    }

    private func append(_ node: String) {
        guard let path = pick(node, "file") else { return }
        let extra = Array("\nappended by op \(opNumber) on \(node)\n".utf8) + Self.content(seed: seed, op: opNumber, node: node, size: 64, &rng)
        guard let result = folder(node).append(path, extra) else {
            note("#\(opNumber) \(node) append \(path): not applied (gone or replaced while appending)")
            return
        }
        ledger.replaced([result.old], op: opNumber)
        ledger.wrote(result.new, node: node, path: path, op: opNumber)
        count("append")
        note("#\(opNumber) \(node) append \(path): \(result.old.prefix(8)) -> \(result.new.prefix(8))")
    }

    private func renameFile(_ node: String) {
        let kind = Int.random(in: 0..<5, using: &rng) == 0 ? "link" : "file"
        guard let from = pick(node, kind), let to = freshPath(node) else { return }
        let moved = folder(node).move(from, to: to)
        if moved { count("rename") }
        note("#\(opNumber) \(node) rename \(kind) \(from) -> \(to)\(moved ? "" : ": failed (errno \(errno))")")
    }

    private func renameDirectory(_ node: String) {
        guard let from = pick(node, "dir"), let to = freshPath(node, directory: true), !to.hasPrefix(from + "/") else { return }
        let moved = folder(node).move(from, to: to)
        if moved { count("rename dir") }
        note("#\(opNumber) \(node) rename dir \(from) -> \(to)\(moved ? "" : ": failed (errno \(errno))")")
    }

    private func makeDirectory(_ node: String) {
        guard let path = freshPath(node, directory: true) else { return }
        let made = folder(node).makeDirectory(path)
        if made { count("mkdir") }
        note("#\(opNumber) \(node) mkdir \(path)\(made ? "" : ": failed (errno \(errno))")")
    }

    private func delete(_ node: String, kind: String) {
        let kind = kind == "file" && Int.random(in: 0..<5, using: &rng) == 0 ? "link" : kind
        guard let path = pick(node, kind) else { return }
        guard let removed = folder(node).remove(path) else {
            note("#\(opNumber) \(node) delete \(kind) \(path): already gone")
            return
        }
        ledger.replaced(removed, op: opNumber)
        count("delete \(kind)")
        note("#\(opNumber) \(node) delete \(kind) \(path): removed \(short(removed))")
    }

    private func symlink(_ node: String) {
        let existing = Int.random(in: 0..<2, using: &rng) == 0 ? pick(node, "link") : nil
        guard let path = existing ?? freshPath(node) else { return }
        let siblings = Self.fileNames + Self.directoryNames + ["missing-target"]
        let target = (path.contains("/") && Bool.random(using: &rng) ? "../" : "") + siblings.randomElement(using: &rng)!
        guard let replaced = folder(node).link(path, to: target) else {
            note("#\(opNumber) \(node) symlink \(path) -> \(target): failed (errno \(errno))")
            return
        }
        ledger.replaced(replaced, op: opNumber)
        count(existing == nil ? "symlink" : "retarget")
        note("#\(opNumber) \(node) \(existing == nil ? "symlink" : "retarget") \(path) -> \(target), replaced \(short(replaced))")
    }

    /// The same file edited on two nodes within a few microseconds: neither saw the other's version.
    private func concurrentEdit() {
        let pair = ChaosCluster.names.shuffled(using: &rng).prefix(2)
        let first = folder(pair.first!).entries(), second = folder(pair.last!).entries()
        guard let path = first.filter({ $0.value == "file" && second[$0.key] == "file" }).keys.sorted().randomElement(using: &rng) else { return }
        note("#\(opNumber) concurrent edit of \(path) on \(pair.joined(separator: " and ")):")
        for node in pair { writeVersion(node, path, what: "concurrent edit") }
    }

    private func kill(_ node: String) throws {
        guard cluster.isRunning(node) else { return }
        cluster.kill(node)
        count("kill")
        let after = Double(Int.random(in: 300...3000, using: &rng)) / 1000
        note("#\(opNumber) SIGKILL \(node) (restart in \(after) s)")
        pending.append((Date().addingTimeInterval(after), "restart \(node)", { [cluster] in try cluster.restart(node) }))
    }

    private func cut() {
        let up = cluster.links.filter { $0.state == .up }
        guard let link = up.randomElement(using: &rng) else { return }
        let state: ChaosLink.State = Bool.random(using: &rng) ? .refused : .silent
        let after = Double(Int.random(in: 500...4000, using: &rng)) / 1000
        link.state = state
        count("cut \(state.rawValue)")
        note("#\(opNumber) link \(link.name) \(state.rawValue) for \(after) s")
        pending.append((Date().addingTimeInterval(after), "link \(link.name) up", { link.state = .up }))
    }

    /// `syncpeer disconnect`: neither side redials until one restarts (SIGTERM, start).
    private func disconnect(_ node: String) throws {
        guard cluster.isRunning(node) else { return }
        let peer = ChaosCluster.names.filter { $0 != node }.randomElement(using: &rng)!
        guard cluster.disconnect(node, from: peer) else {
            note("#\(opNumber) \(node) disconnect \(peer): not connected")
            return
        }
        count("disconnect")
        let after = Double(Int.random(in: 500...3000, using: &rng)) / 1000
        note("#\(opNumber) \(node) disconnect \(peer) (\(node) restarts in \(after) s)")
        pending.append((Date().addingTimeInterval(after), "stop and start \(node) after its disconnect", { [cluster] in
            cluster.stop(node)
            try cluster.restart(node)
        }))
    }

    // MARK: - Quiescence and invariants

    /// Waits until every node is quiet (idle, peers connected and at 100 %) and the three
    /// trees are equal and unchanged over three checks a second apart. Nil when reached,
    /// else what was still not quiet.
    func waitForQuiescence(bound: Double) -> String? {
        let deadline = Date().addingTimeInterval(bound)
        var previous: [String: String]?
        var stable = 0
        var last = "not checked"
        while Date() < deadline {
            let unrest = ChaosCluster.names.compactMap { cluster.unrest($0) }
            let trees = ChaosCluster.names.map { FolderSyncTests.tree(cluster.folders[$0]!) }
            let equal = trees.allSatisfy { $0 == trees[0] }
            if unrest.isEmpty && equal && trees[0] == previous {
                stable += 1
                if stable >= 3 {
                    note("quiescent: \(trees[0].count) entries on every node")
                    return nil
                }
            } else {
                stable = 0
            }
            previous = equal ? trees[0] : nil
            last = (unrest + (equal ? [] : ["the trees differ"])).joined(separator: "; ")
            Thread.sleep(forTimeInterval: 1)
        }
        note("not quiescent: \(last)")
        return last.isEmpty ? "the trees kept changing" : last
    }

    func invariantFailures() -> [String] {
        var failures: [String] = []
        let trees = Dictionary(uniqueKeysWithValues: ChaosCluster.names.map { ($0, FolderSyncTests.tree(cluster.folders[$0]!)) })
        if let difference = Self.difference(trees) { failures.append("the trees differ:\n" + difference) }

        // A required version on no node is lost; on some nodes only, the trees did not converge.
        let present = trees.mapValues { tree in
            Set(tree.values.compactMap { $0.hasPrefix("file ") ? $0.split(separator: " ").last.map(String.init) : nil })
        }
        var missingSomewhere: [String] = []
        for (hash, version) in ledger.required.sorted(by: { $0.value.op < $1.value.op }) {
            let without = ChaosCluster.names.filter { !present[$0]!.contains(hash) }
            if without.isEmpty { continue }
            let what = "\(hash.prefix(8)) (op #\(version.op) on \(version.node) at \(version.path))"
            guard without.count == ChaosCluster.names.count else {
                missingSomewhere.append(what + " not on " + without.joined(separator: ", "))
                continue
            }
            let trace = log.filter { $0.contains(hash.prefix(8)) || $0.contains(" \(version.path)") }
            failures.append("version \(what) is LOST on every node; its history:\n" + trace.map { "    " + $0 }.joined(separator: "\n"))
        }
        if !missingSomewhere.isEmpty {
            failures.append("\(missingSomewhere.count) version(s) kept on some nodes only: " + missingSomewhere.joined(separator: "; "))
        }

        let sentinel = FolderSyncTests.tree(cluster.sentinel)
        if sentinel != sentinelBefore { failures.append("the sentinel tree beside the folders changed: \(sentinelBefore) -> \(sentinel)") }
        let around = neighbours()
        if around != neighboursBefore { failures.append("entries beside the folders changed: \(neighboursBefore) -> \(around)") }

        for name in ChaosCluster.names {
            let left = Self.leftovers(cluster.folders[name]!)
            if !left.isEmpty { failures.append("temporary files left on \(name): \(left)") }
        }
        return failures + versionFailures()
    }

    /// What lies beside the folders: the test root and the receive folders (homes excluded:
    /// the daemons own them).
    private func neighbours() -> [String: [String]] {
        let root = cluster.env.root.path
        var out: [String: [String]] = [:]
        for directory in [root, root + "/alice-recv", root + "/bob-recv", root + "/carol-recv"] {
            out[directory] = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
        }
        return out
    }

    /// Temporary files and staged partials anywhere below `root`.
    static func leftovers(_ root: String) -> [String] {
        var out: [String] = []
        guard let walker = FileManager.default.enumerator(atPath: root) else { return out }
        while let relative = walker.nextObject() as? String {
            let name = (relative as NSString).lastPathComponent
            if name.hasSuffix(IgnorePatterns.temporarySuffix) { out.append(relative) }
            if name == IgnorePatterns.stagingDirectoryName {
                let staged = (try? FileManager.default.subpathsOfDirectory(atPath: root + "/" + relative)) ?? []
                out += staged.map { relative + "/" + $0 }
            }
        }
        return out
    }

    /// The paths whose entries differ between nodes, with each node's entry; nil if equal.
    static func difference(_ trees: [String: [String: String]]) -> String? {
        let paths = Set(trees.values.flatMap(\.keys)).sorted()
        let lines = paths.compactMap { path -> String? in
            let values = ChaosCluster.names.map { trees[$0]?[path] ?? "absent" }
            guard Set(values).count > 1 else { return nil }
            return "  \(path): " + zip(ChaosCluster.names, values).map { "\($0) \($1.count > 30 ? String($1.prefix(30)) + "…" : $1)" }.joined(separator: " | ")
        }
        return lines.isEmpty ? nil : lines.joined(separator: "\n")
    }
}
