import Foundation
import Glibc
import Testing

/// Three real daemons (alice, bob, carol) sharing one folder in a full mesh, every pair
/// joined through a ``ChaosLink`` the test can cut; nodes can be killed and restarted.
///
/// Alice shares the folder with bob and carol (who accept automatically); carol then shares
/// her copy with bob, who accepts, so that each node syncs with both others. Daemons listen on
/// 127.61.0.1–3 with `--no-discovery`; nothing leaves loopback.
final class ChaosCluster {
    static let names = ["alice", "bob", "carol"]
    /// Pairs of node indices joined by a link (the first dials the second when pairing).
    static let linkEnds = [(0, 1), (0, 2), (2, 1)]

    let env: SyncpeerRunner
    let environment: [String: String]
    /// Running daemons by name (absent: killed or stopped).
    private(set) var daemons: [String: DaemonProcess] = [:]
    private var addresses: [String: (host: String, port: UInt16)] = [:]
    private var homes: [String: String] = [:]
    private(set) var links: [ChaosLink] = []
    let folders: [String: String]
    /// Beside the folders: must be exactly as it was at the end.
    let sentinel: String
    let scratch: String

    init(environment: [String: String], initialFiles: (String) throws -> Void) throws {
        env = try SyncpeerRunner()
        self.environment = environment
        let root = env.root.path
        folders = ["alice": root + "/alice-docs", "bob": root + "/bob-recv/alice-docs", "carol": root + "/carol-recv/alice-docs"]
        sentinel = root + "/sentinel"
        scratch = root + "/scratch"
        for directory in [root + "/alice-recv", root + "/bob-recv", root + "/carol-recv", folders["alice"]!, sentinel + "/inner", scratch] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        try "do not touch".write(toFile: sentinel + "/note.txt", atomically: false, encoding: .utf8)
        try "inner".write(toFile: sentinel + "/inner/alice-docs", atomically: false, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: sentinel + "/link", withDestinationPath: "../alice-docs")
        try initialFiles(folders["alice"]!)

        for (index, name) in Self.names.enumerated() {
            let daemon = try start(name, listen: "127.61.0.\(index + 1):0")
            addresses[name] = (daemon.host, daemon.port)
            homes[name] = daemon.home
        }
        for (number, (i, j)) in Self.linkEnds.enumerated() {
            let (a, b) = (Self.names[i], Self.names[j])
            let link = try ChaosLink(name: "\(a)-\(b)", index: number, first: addresses[a]!, second: addresses[b]!)
            links.append(link)
            _ = try env.pair(daemons[a]!, daemons[b]!, target: link.addressOfSecond, autoAccepted: true)
            try daemons[a]!.waitForState("connected", peer: b)
        }
        let share = try env.cli(daemons["alice"]!, ["share", folders["alice"]!, "--with", "bob", "--with", "carol"])
        try #require(share.status == 0, "\(share.stderr)")
        for name in ["bob", "carol"] {
            try FolderSyncTests.eventually("\(name) has the folder") { ((try? status(name))?.count ?? 0) == 1 }
        }
        let before = daemons["bob"]!.events.count
        let carolShares = try env.cli(daemons["carol"]!, ["share", folders["carol"]!, "--with", "bob"])
        try #require(carolShares.status == 0, "\(carolShares.stderr)")
        let offer = try daemons["bob"]!.waitFor("share_offer", after: before, timeout: 15)
        let accepted = try env.cli(daemons["bob"]!, ["accept", try #require(offer["folder"] as? String)])
        try #require(accepted.status == 0, "\(accepted.stderr)")
        // The chaos deletes whole directories at random: the mass-change guard (issue 41.5)
        // would hold such a change for a user, and convergence is what the runs check.
        for name in Self.names {
            for folder in try status(name) {
                let path = try #require(folder["path"] as? String)
                let off = try env.cli(daemons[name]!, ["guard", path, "--percent", "0", "--files", "0"])
                try #require(off.status == 0, "\(off.stderr)")
            }
        }
    }

    private func daemonArguments(_ name: String) -> [String] {
        ["--auto-accept", "--receive-dir", env.root.path + "/\(name)-recv"]
    }

    @discardableResult
    private func start(_ name: String, listen: String) throws -> DaemonProcess {
        let daemon = try DaemonProcess(env, name: name, home: homes[name], arguments: daemonArguments(name),
                                       environment: environment, listen: listen)
        daemons[name] = daemon
        return daemon
    }

    func isRunning(_ name: String) -> Bool { daemons[name] != nil }

    /// Every event of every daemon process a node ran, oldest first (for the failure artifacts).
    private var retiredEvents: [String: [[String: Any]]] = [:]

    func allEvents(_ name: String) -> [[String: Any]] {
        (retiredEvents[name] ?? []) + (daemons[name]?.events ?? [])
    }

    private func retire(_ name: String, _ daemon: DaemonProcess) {
        retiredEvents[name, default: []] += daemon.events + [["event": "chaos: process ended"]]
    }

    /// SIGKILL, as a crash or power cut would.
    func kill(_ name: String) {
        guard let daemon = daemons.removeValue(forKey: name) else { return }
        daemon.crash()
        retire(name, daemon)
    }

    /// What went wrong with the daemons themselves (a stop that hung).
    private(set) var problems: [String] = []

    /// SIGTERM and a clean exit; a daemon that does not exit within 15 s is a problem (and killed).
    func stop(_ name: String) {
        guard let daemon = daemons.removeValue(forKey: name) else { return }
        Glibc.kill(daemon.pid, SIGTERM)
        let deadline = Date().addingTimeInterval(15)
        while daemon.process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if daemon.process.isRunning { problems.append("\(name) did not exit within 15 s of SIGTERM") }
        daemon.crash()
        retire(name, daemon)
    }

    /// Starts a stopped node again on its address and home.
    func restart(_ name: String) throws {
        guard daemons[name] == nil, let address = addresses[name] else { return }
        try start(name, listen: "\(address.host):\(address.port)")
    }

    func link(_ a: String, _ b: String) -> ChaosLink {
        links.first { $0.name == "\(a)-\(b)" || $0.name == "\(b)-\(a)" }!
    }

    /// `syncpeer disconnect PEER` on a running node (both ends stop redialling until one restarts).
    func disconnect(_ name: String, from peer: String) -> Bool {
        guard let daemon = daemons[name] else { return false }
        return (try? env.cli(daemon, ["disconnect", peer]).status) == 0
    }

    /// The folders of `syncpeer status --json` on a running node.
    func status(_ name: String) throws -> [[String: Any]] {
        let daemon = try #require(daemons[name], "\(name) is not running")
        let result = try env.cli(daemon, ["status", "--json"])
        guard result.status == 0 else { throw ChaosError("status on \(name) failed: \(result.stderr)") }
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        return object?["folders"] as? [[String: Any]] ?? []
    }

    /// Why a node is not quiet: not running, not exactly one folder, not idle, an error, a
    /// transfer in flight, a peer not connected or not at 100 %. Nil when quiet.
    func unrest(_ name: String) -> String? {
        guard isRunning(name) else { return "\(name) is not running" }
        let folders: [[String: Any]]
        do { folders = try status(name) } catch { return "\(error)" }
        guard folders.count == 1, let folder = folders.first else { return "\(name) has \(folders.count) folders" }
        var problems: [String] = []
        if let state = folder["state"] as? String, state != "idle" { problems.append("state \(state)") }
        if let error = folder["error"] as? String { problems.append("error: \(error)") }
        if let transfers = folder["transfers"] as? [Any], !transfers.isEmpty { problems.append("\(transfers.count) transfers") }
        let peers = folder["peers"] as? [[String: Any]] ?? []
        if peers.count != 2 { problems.append("\(peers.count) peers") }
        for peer in peers {
            let peerName = (peer["peer"] as? [String: Any])?["name"] as? String ?? "?"
            let percent = (peer["percent"] as? NSNumber)?.intValue ?? -1
            let out = (peer["outOfSyncFiles"] as? NSNumber)?.intValue ?? -1
            if peer["connected"] as? Bool != true { problems.append("\(peerName) not connected") }
            if percent != 100 || out != 0 { problems.append("\(peerName) at \(percent) % (\(out) files differ)") }
        }
        return problems.isEmpty ? nil : "\(name): " + problems.joined(separator: ", ")
    }

    /// The last error and folder events of each node (for a failure report).
    func recentProblems(limit: Int = 8) -> String {
        Self.names.compactMap { name -> String? in
            let events = allEvents(name).filter { ["error", "folder", "conflict"].contains($0["event"] as? String ?? "") }
            guard !events.isEmpty else { return nil }
            let lines = events.suffix(limit).map { event in
                event.filter { $0.key != "time" }.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")
            }
            return "\(name) (\(events.count) error/folder/conflict events, last \(lines.count)):\n    " + lines.joined(separator: "\n    ")
        }.joined(separator: "\n")
    }

    /// Writes each node's events (NDJSON), a copy of its index and `log` into `directory`.
    func writeArtifacts(to directory: String, log: [String]) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try (log.joined(separator: "\n") + "\n").write(toFile: directory + "/ops.log", atomically: false, encoding: .utf8)
        for name in Self.names {
            let lines = allEvents(name).compactMap { event -> String? in
                guard let data = try? JSONSerialization.data(withJSONObject: event, options: [.sortedKeys]) else { return nil }
                return String(decoding: data, as: UTF8.self)
            }
            try (lines.joined(separator: "\n") + "\n").write(toFile: directory + "/\(name).events.ndjson", atomically: false, encoding: .utf8)
            // The node's index (records and versions of every path), with its write-ahead log.
            for suffix in ["", "-wal", "-shm"] {
                let source = (homes[name] ?? "") + "/index.db" + suffix, target = directory + "/\(name).index.db" + suffix
                try? FileManager.default.removeItem(atPath: target)
                try? FileManager.default.copyItem(atPath: source, toPath: target)
            }
        }
    }

    func shutdown() {
        for name in Array(daemons.keys) { kill(name) }
        links.forEach { $0.stop() }
        env.cleanup()
    }
}

struct ChaosError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
