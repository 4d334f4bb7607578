import Foundation
import Testing

/// docs/JSON.md, read as tables: per command, event and error, the fields it documents.
/// A field's path joins keys with dots and marks list items with `[]` (`folders[].peers[].peer.id`);
/// type `peer` stands for `peer.id` and `peer.name`; type `object` allows any keys inside.
struct JSONDocument {
    struct Field {
        let path: String
        let optional: Bool
        let openObject: Bool
    }

    /// "command peers", "event transfer", "errors", "option --version" → fields.
    private(set) var sections: [String: [Field]] = [:]

    init() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/JSON.md")
        var current: [String] = []
        for line in try String(contentsOf: url, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("## Errors") { current = ["errors"]; sections["errors"] = []; continue }
            if line.hasPrefix("### ") {
                // "### command `accept`, `decline`" names several that share the table.
                let words = line.dropFirst(4).split(separator: " ")
                let names = line.split(separator: "`").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
                current = names.map { "\(words.first ?? "") \($0)" }
                for key in current { sections[key] = sections[key] ?? [] }
                continue
            }
            guard !current.isEmpty, line.hasPrefix("| `") else { continue }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 2 else { continue }
            let path = cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            let type = cells[1]
            let optional = type.hasSuffix("?")
            for section in current {
                if type.hasPrefix("peer") {
                    sections[section]!.append(Field(path: path, optional: optional, openObject: false))
                    sections[section]!.append(Field(path: path + ".id", optional: false, openObject: false))
                    sections[section]!.append(Field(path: path + ".name", optional: false, openObject: false))
                } else {
                    sections[section]!.append(Field(path: path, optional: optional, openObject: type.hasPrefix("object")))
                }
            }
        }
    }

    /// What is wrong with `object` as an instance of `section`: undocumented fields printed,
    /// documented fields missing.
    func problems(_ object: [String: Any], as section: String, extra: [Field] = []) -> [String] {
        guard let fields = sections[section] else { return ["docs/JSON.md has no section '\(section)'"] }
        let all = fields + extra
        var paths = Set<String>()
        func walk(_ value: Any, _ path: String) {
            if !path.isEmpty { paths.insert(path) }
            if all.contains(where: { $0.path == path && $0.openObject }) { return }
            if let object = value as? [String: Any] {
                for (key, item) in object { walk(item, path.isEmpty ? key : path + "." + key) }
            } else if let list = value as? [Any], list.contains(where: { $0 is [String: Any] }) {
                for item in list { walk(item, path + "[]") }
            }
        }
        walk(object, "")
        var problems: [String] = []
        for path in paths.sorted() {
            // A documented list of objects ("peers[].id") documents the list ("peers") too.
            let documented = all.contains { $0.path == path || $0.path.hasPrefix(path + "[].") || $0.path.hasPrefix(path + ".") }
            if !documented { problems.append("\(section): '\(path)' is not in docs/JSON.md") }
        }
        for field in all where !field.optional && !paths.contains(field.path) {
            // Required where its parent is present (a list's fields, when the list has items).
            let parent = field.path.split(separator: ".").dropLast().joined(separator: ".")
            if parent.isEmpty || paths.contains(parent) || paths.contains(where: { $0.hasPrefix(parent + ".") }) {
                problems.append("\(section): documented '\(field.path)' is missing in \(object)")
            }
        }
        return problems
    }
}

/// Every command's `--json` output (and every event the daemons print) holds the fields
/// docs/JSON.md documents for it, and only those; errors under `--json` are JSON with the
/// documented exit code.
@Suite(.serialized)
struct JSONContractTests {
    let document: JSONDocument

    init() throws { document = try JSONDocument() }

    /// The lines of a command's standard output, each checked as the command's result or
    /// as the event it is.
    func check(_ command: String, _ result: SyncpeerRunner.Result, status: Int32 = 0,
               sourceLocation: SourceLocation = #_sourceLocation) -> [[String: Any]] {
        #expect(result.status == status, "\(command): \(result.stderr)", sourceLocation: sourceLocation)
        var objects: [[String: Any]] = []
        for line in result.stdout.split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                Issue.record("\(command): a line that is not a JSON object: \(line)", sourceLocation: sourceLocation)
                continue
            }
            objects.append(object)
            for problem in problems(object, command: command) { Issue.record(Comment(rawValue: problem), sourceLocation: sourceLocation) }
        }
        return objects
    }

    func problems(_ object: [String: Any], command: String) -> [String] {
        if let kind = object["event"] as? String {
            let common = [JSONDocument.Field(path: "event", optional: false, openObject: false),
                          JSONDocument.Field(path: "time", optional: false, openObject: false)]
            return document.problems(object, as: "event \(kind)", extra: common)
        }
        return document.problems(object, as: command)
    }

    /// A failing command under --json: one JSON error on standard error, nothing on stdout.
    func checkError(_ command: String, _ result: SyncpeerRunner.Result, exit: Int32, kind: String,
                    sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status == exit, "\(command): exit \(result.status), \(result.stderr)", sourceLocation: sourceLocation)
        // Standard output holds no result, only the events that came before the failure.
        for line in result.stdout.split(separator: "\n") {
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["event"] != nil, "\(command): \(line)", sourceLocation: sourceLocation)
            for problem in problems(object ?? [:], command: command) { Issue.record(Comment(rawValue: problem), sourceLocation: sourceLocation) }
        }
        let object = try? JSONSerialization.jsonObject(with: Data(result.stderr.utf8)) as? [String: Any]
        guard let object else {
            Issue.record("\(command): the error is not JSON: \(result.stderr)", sourceLocation: sourceLocation)
            return
        }
        for problem in document.problems(object, as: "errors") { Issue.record(Comment(rawValue: problem), sourceLocation: sourceLocation) }
        #expect(object["kind"] as? String == kind, "\(command): \(object)", sourceLocation: sourceLocation)
        #expect((object["exit"] as? NSNumber)?.int32Value == exit, "\(command): \(object)", sourceLocation: sourceLocation)
    }

    @Test func everyCommandPrintsTheDocumentedJSON() throws {
        let pair = try TransferPair()
        let (env, alice, bob) = (pair.env, pair.alice, pair.bob)
        defer {
            alice.stop()
            bob.stop()
            env.cleanup()
        }
        func cli(_ daemon: DaemonProcess, _ arguments: [String]) throws -> SyncpeerRunner.Result {
            try env.cli(daemon, arguments + ["--json"])
        }

        _ = check("command init", try env.run(["--home", env.home("fresh"), "init", "--name", "fresh", "--json"]))
        _ = check("command id", try cli(alice, ["id"]))
        _ = check("option --version", try env.run(["--version", "--json"]))
        let peers = check("command peers", try cli(alice, ["peers"]))
        #expect(peers.count == 1)

        // A third node invites alice; alice lists the invitation and declines it.
        let carol = try DaemonProcess(env, name: "carol")
        defer { carol.stop() }
        let pairing = try PairingProcess(env, from: carol, to: alice)
        try alice.waitFor("invitation")
        let invitations = check("command invitations", try cli(alice, ["invitations"]))
        let invitation = try #require(invitations.first?["invitation"] as? String)
        _ = check("command decline", try cli(alice, ["decline", invitation]))
        checkError("pair (declined)", try pairing.finish(), exit: 1, kind: "refused")
        // Again, accepted this time: the pair command's events and result, accept's result.
        let seen = alice.events.count
        let second = try PairingProcess(env, from: carol, to: alice)
        let again = try alice.waitFor("invitation", after: seen)
        _ = check("command accept", try cli(alice, ["accept", try #require(again["invitation"] as? String)]))
        let paired = check("command pair", try second.finish())
        #expect(paired.first?["event"] as? String == "invitation_pending" && (paired.last?["peer"] as? [String: Any])?["name"] as? String == "alice",
                "\(paired)")

        // Files: send (progress events and the result), the list, resume, cancel.
        let source = pair.outbox + "/report.bin"
        try TestFiles.random(source, size: 300_000)
        let sent = check("command send", try cli(alice, ["send", source, "--to", "bob"]))
        #expect(sent.last?["state"] as? String == "completed", "\(sent.last ?? [:])")
        _ = check("command transfers", try cli(alice, ["transfers"]))
        _ = check("command resume", try cli(alice, ["resume"]))
        checkError("resume (unknown ID)", try cli(alice, ["resume", "deadbeef"]), exit: 3, kind: "notFound")
        checkError("cancel (unknown ID)", try cli(alice, ["cancel", "deadbeef"]), exit: 3, kind: "notFound")

        // receive: bob waits for the next offer (taken before its auto-accept), alice sends.
        let inbox = env.home("received")
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        let receiving = Process()
        receiving.executableURL = URL(fileURLWithPath: SyncpeerRunner.binary)
        receiving.arguments = ["--home", bob.home, "receive", "--accept", "--dir", inbox, "--json"]
        receiving.environment = ["PATH": "/usr/bin:/bin", "SYNCPEER_INTERFACE": "lo"]
        let receivedOut = Pipe()
        receiving.standardOutput = receivedOut
        receiving.standardError = FileHandle.nullDevice
        try receiving.run()
        // The waiter is registered once the request reached bob's daemon; until then an offer
        // would be auto-accepted. Sending waits for it by retrying with a new file name.
        for attempt in 0..<20 where receiving.isRunning {
            let file = pair.outbox + "/for-receive-\(attempt).bin"
            try TestFiles.random(file, size: 10_000)
            _ = try cli(alice, ["send", file, "--to", "bob"])
            Thread.sleep(forTimeInterval: 0.2)
        }
        receiving.waitUntilExit()
        let receiveResult = SyncpeerRunner.Result(status: receiving.terminationStatus,
                                                  stdout: String(decoding: receivedOut.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
                                                  stderr: "")
        let received = check("command receive", receiveResult)
        #expect(received.last?["state"] as? String == "completed", "\(received)")

        // Piped without --json, send prints text only.
        let piped = try env.cli(alice, ["send", source, "--to", "bob"])
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(!piped.stdout.contains("{"), "piped text output mixes in JSON: \(piped.stdout)")

        _ = check("command msg", try cli(alice, ["msg", "--to", "bob", "hello"]))
        _ = check("command rename", try cli(bob, ["rename", "bob"]))
        // (Off: alice must be asked about bob's folder below.)
        _ = check("command auto-accept", try cli(alice, ["auto-accept", "bob", "off"]))

        // Folders: bob shares one; alice (who asks before accepting) sees the offer in her
        // status and accepts it; then her status, conflicts, confirm and unshare.
        let folder = env.home("shared")
        let copy = env.home("alice-shared")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data("notes".utf8).write(to: URL(fileURLWithPath: folder + "/notes.txt"))
        let shared = check("command share", try cli(bob, ["share", folder, "--with", "alice"]))
        let folderID = try #require(shared.first?["folder"] as? String)
        let offerEvent = try alice.waitFor("share_offer")
        #expect(offerEvent["folder"] as? String == folderID)
        let offered = check("command status", try cli(alice, ["status"]))
        #expect((offered.first?["offers"] as? [Any])?.count == 1, "\(offered)")
        _ = check("command accept", try cli(alice, ["accept", folderID, "--into", copy]))
        try FolderSyncTests.eventually("the folder reaches alice") {
            FileManager.default.fileExists(atPath: copy + "/notes.txt")
        }
        _ = check("command status", try cli(alice, ["status"]))
        _ = check("command status", try cli(bob, ["status"]))
        _ = check("command conflicts", try cli(alice, ["conflicts"]))
        checkError("resolve (no conflict)", try cli(alice, ["resolve", copy + "/notes.txt", "--keep", "local"]),
                   exit: 3, kind: "notFound")
        // Versions (issue 41): bob edits notes.txt, and alice keeps the version it replaced.
        try "notes, second version".write(toFile: folder + "/notes.txt", atomically: true, encoding: .utf8)
        try FolderSyncTests.eventually("the edit reaches alice") {
            (try? String(contentsOfFile: copy + "/notes.txt", encoding: .utf8)) == "notes, second version"
        }
        let history = check("command history", try cli(alice, ["history", copy + "/notes.txt"]))
        let versionID = try #require((history.first?["versions"] as? [[String: Any]])?.first?["id"] as? String, "\(history)")
        _ = check("command restore", try cli(alice, ["restore", copy + "/notes.txt", "--version", versionID, "--to", copy + "/notes-before.txt"]))
        _ = check("command versions", try cli(alice, ["versions", copy, "simple 5"]))
        _ = check("command confirm", try cli(alice, ["confirm", copy]))
        _ = check("command verify", try cli(alice, ["verify", copy]))
        _ = check("command rescan", try cli(alice, ["rescan", copy]))
        let tree = check("command tree", try cli(alice, ["tree", copy]))
        #expect(tree.contains { $0["name"] as? String == "notes.txt" }, "\(tree)")
        _ = check("command select", try cli(alice, ["select", copy, "elsewhere"]))
        _ = check("command select", try cli(alice, ["select", copy, "--all"]))
        checkError("select ..", try cli(alice, ["select", copy, "a/../b"]), exit: 2, kind: "invalidArgument")
        _ = check("command pause", try cli(alice, ["pause", copy]))
        _ = check("command resume-folder", try cli(alice, ["resume-folder", copy]))
        let role = check("command role", try cli(alice, ["role", copy, "bob", "send-only", "--no-deletes"]))
        #expect(role.first?["role"] as? String == "send-only", "\(role)")
        _ = check("command changes", try cli(alice, ["changes", copy]))
        _ = check("command guard", try cli(alice, ["guard", copy, "--percent", "40"]))
        _ = check("command override", try cli(alice, ["override", copy]))
        _ = check("command revert", try cli(alice, ["revert", copy]))
        _ = check("command status", try cli(alice, ["status"]))
        _ = check("command unshare", try cli(alice, ["unshare", copy]))

        // Discovery is off in these daemons: browse and visibility say so, as JSON.
        checkError("browse", try cli(alice, ["browse"]), exit: 3, kind: "notFound")
        checkError("visibility", try cli(alice, ["visibility"]), exit: 3, kind: "notFound")
        checkError("msg (unknown peer)", try cli(alice, ["msg", "--to", "zed", "hi"]), exit: 3, kind: "notFound")
        checkError("send (usage)", try env.run(["--home", alice.home, "send", "--json"]), exit: 2, kind: "usage")
        checkError("send (never initialised)", try env.run(["--home", env.home("nobody"), "send", "/etc/hostname", "--to", "bob", "--json"]),
                   exit: 3, kind: "notInitialised")

        _ = check("command disconnect", try cli(alice, ["disconnect", "bob"]))
        _ = check("command connect", try cli(alice, ["connect", "bob"]))
        _ = check("command unpair", try cli(alice, ["unpair", "bob"]))
        _ = check("command receive-dir", try cli(alice, ["receive-dir", env.home("alice-inbox")]))

        // Every event both daemons printed, as documented.
        for daemon in [alice, bob, carol] {
            for event in daemon.events {
                for problem in problems(event, command: "command events") { Issue.record(Comment(rawValue: "\(daemon.name): \(problem)")) }
            }
        }
    }
}
