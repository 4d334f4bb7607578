import PeerNet
import Foundation
import Testing
@testable import SyncEngine

/// The control protocol as one type: what the client writes is what the server reads, and
/// docs/PROTOCOL.md lists every operation the code has.
struct ControlRequestTests {
    static let samples: [ControlRequest] = [
        .status, .peers, .invitations, .browse, .folders, .offers, .conflicts, .transfers, .events,
        .visibility(visible: nil), .visibility(visible: false), .rename(name: "bob's laptop"), .receiveDir(directory: "/tmp/in"),
        .pair(address: "127.0.0.1:41414", context: "photos"), .pair(address: "bob", context: nil),
        .answerInvitation(invitation: "K7Q2PX", accept: true), .answerInvitation(invitation: "K7Q2PX", accept: false),
        .answerOffer(transfer: "3f9a2c71", accept: true, directory: "/tmp/in", follow: true),
        .answerOffer(transfer: "3f9a2c71", accept: false, directory: nil, follow: false),
        .answerShare(folder: "abcde-fghij", accept: true, directory: nil),
        .send(path: "/tmp/a", peer: "bob", name: "a.txt", spool: nil),
        .send(path: "/tmp/a", peer: "bob", name: nil, spool: nil, detach: true),
        .receive(directory: nil, accept: true), .receive(directory: "/tmp", accept: false),
        .share(directory: "/tmp/docs", peers: ["bob", "carol"]), .unshare(directory: "/tmp/docs"),
        .confirm(directory: "/tmp/docs"), .verify(directory: "/tmp/docs"), .rescan(directory: "/tmp/docs", path: nil),
        .rescan(directory: "/tmp/docs", path: "sub/a.txt"), .activity,
        .pauseFolder(directory: "/tmp/docs", paused: true), .pauseFolder(directory: "/tmp/docs", paused: false),
        .ignores(directory: "/tmp/docs", patterns: nil), .ignores(directory: "/tmp/docs", patterns: "*.tmp\nbuild/\n"), .resolve(path: "/tmp/docs/a", keep: "both"), .resolve(path: "/tmp/docs/a", keep: "alice"),
        .cancel(transfer: "3f9a"), .resume(transfer: nil), .resume(transfer: "3f9a"),
        .message(peer: "bob", text: "hi"), .disconnect(peer: "bob"), .connect(peer: "bob"), .unpair(peer: "bob"),
        .autoAccept(peer: "bob", on: false),
        .streamSend(peer: "bob", name: "notes.tar"), .streamReceive(peer: nil), .streamReceive(peer: "alice"),
        .share(directory: "/tmp/docs", peers: ["bob"], only: ["photos/2026", "docs"]),
        .acceptSelected(folder: "abcde-fghij", directory: nil, only: ["docs"]), .acceptSelected(folder: "abcde-fghij", directory: "/tmp/in", only: ["a", "b"]),
        .select(directory: "/tmp/docs", paths: nil), .select(directory: "/tmp/docs", paths: []), .select(directory: "/tmp/docs", paths: ["a", "b/c"]),
        .tree(directory: "/tmp/docs", path: nil), .tree(directory: "/tmp/docs", path: "photos"),
        .history(path: "/tmp/docs/a"), .restore(path: "/tmp/docs/old", at: 1_764_950_400_000, version: nil, to: nil),
        .restore(path: "/tmp/docs/a", at: nil, version: "ABCDEFG-12", to: "/tmp/a-before"),
        .versions(directory: "/tmp/docs", policy: nil), .versions(directory: "/tmp/docs", policy: "simple 5 cap 1G"),
        .share(directory: "/tmp/docs", peers: ["bob"], role: "send-only", noDeletes: true),
        .role(directory: "/tmp/docs", peer: "bob", role: "receive-only", noDeletes: nil),
        .role(directory: "/tmp/docs", peer: "bob", role: nil, noDeletes: false), .roleChanges(directory: "/tmp/docs"),
        .override(directory: "/tmp/docs"), .revert(directory: "/tmp/docs"), .guardLimits(directory: "/tmp/docs", percent: 20, files: nil),
        .guardLimits(directory: "/tmp/docs", percent: nil, files: nil),
        .pairKey(key: String(repeating: "ab", count: 32), name: "bob", addresses: ["127.0.0.1:41414"]),
    ]

    @Test(arguments: samples)
    func aRequestReadsBackAsWritten(_ request: ControlRequest) throws {
        let line = request.json(id: 7).encodedLine()
        let parsed = try #require(JSONValue.parse(line))
        #expect(try ControlRequest(json: parsed) == request, "\(line)")
        #expect(parsed["op"]?.stringValue == request.op.rawValue)
    }

    @Test func everyOpHasASample() {
        let covered = Set(Self.samples.map(\.op))
        #expect(covered == Set(ControlRequest.Op.allCases), "missing: \(Set(ControlRequest.Op.allCases).subtracting(covered))")
    }

    @Test func badRequestsAreUsageErrorsNamingTheArgument() {
        let cases: [(JSONValue, String)] = [
            (["op": "msg", "peer": "bob"], "'msg' needs \"text\""),
            (["op": "nope"], "unknown op 'nope'"),
            (["id": 1], "a request must be a JSON object with an \"op\""),
            (["op": "visibility", "visible": "yes"], "'visibility' takes \"visible\": true or false"),
            (["op": "share", "dir": "/tmp"], "'share' needs at least one peer"),
            (["op": "resolve", "path": "/a", "keep": " "], "'resolve' needs \"keep\": a device (name or ID prefix), local, remote or both"),
        ]
        for (json, message) in cases {
            #expect(throws: Never.self) {
                do throws(EngineError) { _ = try ControlRequest(json: json); Issue.record("accepted \(json)") } catch {
                    #expect(error.kind == .invalidArgument && error.description == message, "\(error)")
                }
            }
        }
    }

    /// docs/PROTOCOL.md's table of the control socket names every op of `ControlRequest`.
    @Test func theProtocolDocumentListsEveryOp() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/PROTOCOL.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let section = try #require(text.components(separatedBy: "## Control socket").dropFirst().first?
            .components(separatedBy: "\n## ").first)
        let rows = section.split(separator: "\n").filter { $0.hasPrefix("| `") }
        var documented = Set<String>()
        for row in rows {
            let cell = row.split(separator: "|").first ?? ""
            for name in cell.split(separator: "`").enumerated() where name.offset % 2 == 1 { documented.insert(String(name.element)) }
        }
        let missing = ControlRequest.Op.allCases.map(\.rawValue).filter { !documented.contains($0) }
        #expect(missing.isEmpty, "docs/PROTOCOL.md does not list: \(missing)")
        let unknown = documented.subtracting(ControlRequest.Op.allCases.map(\.rawValue))
        #expect(unknown.isEmpty, "docs/PROTOCOL.md lists ops the code does not have: \(unknown)")
    }
}
