import Foundation
import Glibc
import Testing

/// `syncpeer send` between real daemons on 127.0.0.1: content, mode and mtime arrive intact.
@Suite(.serialized)
struct SendTests {
    @Test(arguments: [0, 1, 65_536, 1_048_576 + 17])
    func filesOfEdgeSizesArriveIntact(size: Int) throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        let source = pair.outbox + "/file-\(size).bin"
        try TestFiles.random(source, size: size, mode: 0o751)
        let result = try pair.send(source)
        #expect(result.status == 0, "\(result.stderr)")
        let final = try #require(TransferPair.result(result.stdout))
        #expect(final["state"] as? String == "completed")
        try TestFiles.expectSame(source, pair.inbox + "/file-\(size).bin")
        // Nothing is left in the staging area.
        #expect(!FileManager.default.fileExists(atPath: pair.inbox + "/.syncpeer-partial"))
    }

    /// A fresh large file is offered at once, its manifest streamed while it is sent
    /// (`streamed-manifest`); with streaming off (a threshold above its size) the sender
    /// shows its hashing first, "preparing", as it does for a folder.
    @Test(arguments: ["streamed", "hashed first"])
    func a300MiBFileArrivesIntact(_ manifest: String) throws {
        let pair = try TransferPair(environment: manifest == "streamed" ? [:] : ["SYNCPEER_STREAM_MANIFEST_FROM": "\(1 << 40)"])
        defer { pair.env.cleanup() }
        let source = pair.outbox + "/big.bin"
        try TestFiles.random(source, size: 300 << 20)
        let result = try pair.send(source)
        #expect(result.status == 0, "\(result.stderr)")
        try TestFiles.expectSame(source, pair.inbox + "/big.bin")
        let final = try #require(TransferPair.result(result.stdout))
        #expect((final["resent"] as? NSNumber)?.intValue == 0)
        // Both ends reported progress along the way, in order.
        let progress = pair.bob.events("transfer").compactMap { ($0["bytes"] as? NSNumber)?.int64Value }
        #expect(progress.count >= 3)
        #expect(progress == progress.sorted())
        #expect(pair.bob.events("transfer").last?["state"] as? String == "completed")
        let lines = result.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let states = lines.compactMap { $0["state"] as? String }
        let preparing = lines.filter { $0["state"] as? String == "preparing" }
        if manifest == "streamed" {
            // Offered before it was read: no "preparing".
            #expect(states.first == "offered" && preparing.isEmpty, "\(states.prefix(5))")
            return
        }
        // The sender showed its chunking first ("preparing", up to the whole size), then the transfer.
        #expect(states.first == "preparing", "\(states.prefix(5))")
        #expect(preparing.allSatisfy { ($0["total"] as? NSNumber)?.intValue == 300 << 20 }, "\(preparing)")
        #expect((preparing.last?["bytes"] as? NSNumber)?.intValue == 300 << 20, "\(preparing.last ?? [:])")
        #expect(states.lastIndex(of: "preparing")! < states.firstIndex { $0 != "preparing" }!)
    }

    @Test func aFolderOfAThousandFilesArrivesIntact() throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        let folder = pair.outbox + "/tree"
        var files: [String] = []
        for i in 0..<1_000 {
            let directory = folder + "/d\(i % 10)/e\(i % 7)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let path = directory + "/f\(i).dat"
            try TestFiles.random(path, size: (i * 37) % 5_000, mode: i % 2 == 0 ? 0o644 : 0o600, mtime: 1_500_000_000_000_000_000 + Int64(i))
            files.append(String(path.dropFirst(folder.count + 1)))
        }
        let result = try pair.send(folder)
        #expect(result.status == 0, "\(result.stderr)")
        for file in files {
            try TestFiles.expectSame(folder + "/" + file, pair.inbox + "/tree/" + file)
        }
        let final = try #require(TransferPair.result(result.stdout))
        #expect((final["files"] as? NSNumber)?.intValue == 1_000)
    }

    /// With nobody running `receive --stdout`, a peer that accepts our offers without asking
    /// (bob runs `--auto-accept`) saves the live stream as a file in its receive folder.
    @Test func standardInputArrivesAsANamedFile() throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        let text = (0..<20_000).map { "line \($0)\n" }.joined()
        let result = try pair.env.cli(pair.alice, ["send", "-", "--to", "bob", "--name", "lines.txt"], stdin: text)
        #expect(result.status == 0, "\(result.stderr)")
        // Without a terminal nor --json, text only: the summary.
        #expect(!result.stdout.contains("{"), "\(result.stdout)")
        #expect(result.stdout.hasPrefix("Sent stream lines.txt to bob"), "\(result.stdout)")
        let saved = try pair.bob.waitFor("transfer") { $0["name"] as? String == "lines.txt" && $0["state"] as? String == "completed" }
        #expect(saved["path"] as? String == pair.inbox + "/lines.txt")
        #expect(try String(contentsOfFile: pair.inbox + "/lines.txt", encoding: .utf8) == text)
        #expect(try TestFiles.meta(pair.inbox + "/lines.txt").mode == 0o644)
        // Nothing was spooled, and no partial file is left.
        let spool = (try? FileManager.default.contentsOfDirectory(atPath: pair.alice.home + "/spool")) ?? []
        #expect(spool.isEmpty, "\(spool)")
        let staging = (try? FileManager.default.contentsOfDirectory(atPath: pair.inbox + "/.syncpeer-partial")) ?? []
        #expect(staging.isEmpty, "\(staging)")
    }

    @Test func nameClashesNeverOverwrite() throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        try "mine".write(toFile: pair.inbox + "/notes.txt", atomically: true, encoding: .utf8)
        let source = pair.outbox + "/notes.txt"
        for round in 1...2 {
            try "theirs \(round)".write(toFile: source, atomically: true, encoding: .utf8)
            #expect(try pair.send(source).status == 0)
        }
        #expect(try String(contentsOfFile: pair.inbox + "/notes.txt", encoding: .utf8) == "mine")
        #expect(try String(contentsOfFile: pair.inbox + "/notes (1).txt", encoding: .utf8) == "theirs 1")
        #expect(try String(contentsOfFile: pair.inbox + "/notes (2).txt", encoding: .utf8) == "theirs 2")
    }

    /// Received names of up to 255 bytes (multibyte included) fit: the partial files are
    /// named by the transfer, and a clash's numbered name is shortened to fit.
    @Test func namesOf255BytesArriveAndClashesFit() throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        let names = [String(repeating: "漢", count: 83) + ".txt", String(repeating: "😀", count: 63) + ".md",
                     String(repeating: "n", count: 255)]
        for name in names {
            let source = pair.outbox + "/" + name
            for round in 1...2 {
                try "\(name.utf8.count) bytes, round \(round)".write(toFile: source, atomically: false, encoding: .utf8)
                let sent = try pair.send(source)
                #expect(sent.status == 0, "\(name.utf8.count) bytes: \(sent.stderr)")
            }
        }
        let received = try FileManager.default.contentsOfDirectory(atPath: pair.inbox).filter { !$0.hasPrefix(".") }
        #expect(received.count == 6, "\(received)")
        for name in received {
            #expect(name.utf8.count <= 255)
            let text = try String(contentsOfFile: pair.inbox + "/" + name, encoding: .utf8)
            #expect(text.hasSuffix(names.contains(name) ? "round 1" : "round 2"), "\(name): \(text)")
        }
        let folder = pair.outbox + "/" + String(repeating: "d", count: 255)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try "deep".write(toFile: folder + "/" + String(repeating: "é", count: 126) + ".x", atomically: false, encoding: .utf8)
        #expect(try pair.send(folder).status == 0)
        #expect(try String(contentsOfFile: pair.inbox + "/" + String(repeating: "d", count: 255) + "/" + String(repeating: "é", count: 126) + ".x",
                           encoding: .utf8) == "deep")
    }

    @Test func aDeclinedOfferLeavesNothing() throws {
        let pair = try TransferPair(bobArguments: [])
        defer { pair.env.cleanup() }
        let source = pair.outbox + "/x.bin"
        try TestFiles.random(source, size: 1000)
        let sending = Process()
        sending.executableURL = URL(fileURLWithPath: SyncpeerRunner.binary)
        sending.arguments = ["--home", pair.alice.home, "send", source, "--to", "bob"]
        let err = Pipe()
        sending.standardError = err
        sending.standardOutput = FileHandle.nullDevice
        try sending.run()
        let offer = try pair.bob.waitFor("offer")
        #expect(offer["name"] as? String == "x.bin")
        let id = try #require(offer["transfer"] as? String)
        let listed = try pair.env.cli(pair.bob, ["transfers"])
        #expect(listed.stdout.contains("offered"), "\(listed.stdout)")
        #expect(try pair.env.cli(pair.bob, ["decline", String(id.prefix(8))]).status == 0)
        sending.waitUntilExit()
        #expect(sending.terminationStatus == 1)
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(message.contains("bob declined"), "\(message)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: pair.inbox).isEmpty)
    }

    @Test func acceptingAnOfferByIDReceivesIntoTheGivenFolder() throws {
        let pair = try TransferPair(bobArguments: [])
        defer { pair.env.cleanup() }
        let elsewhere = pair.env.home("elsewhere")
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        let source = pair.outbox + "/y.bin"
        try TestFiles.random(source, size: 200_000)
        let sending = Process()
        sending.executableURL = URL(fileURLWithPath: SyncpeerRunner.binary)
        sending.arguments = ["--home", pair.alice.home, "send", source, "--to", "bob"]
        sending.standardOutput = FileHandle.nullDevice
        sending.standardError = FileHandle.nullDevice
        try sending.run()
        let offer = try pair.bob.waitFor("offer")
        let id = try #require(offer["transfer"] as? String)
        let accepted = try pair.env.cli(pair.bob, ["accept", id, "--into", elsewhere])
        #expect(accepted.status == 0, "\(accepted.stderr)")
        #expect(accepted.stdout.contains("Received y.bin from alice"), "\(accepted.stdout)")
        sending.waitUntilExit()
        #expect(sending.terminationStatus == 0)
        try TestFiles.expectSame(source, elsewhere + "/y.bin")
    }

    @Test func aPeerSetToAutoAcceptIsReceivedWithoutAsking() throws {
        let pair = try TransferPair(bobArguments: [])
        defer { pair.env.cleanup() }
        let set = try pair.env.cli(pair.bob, ["auto-accept", "alice", "on"])
        #expect(set.status == 0, "\(set.stderr)")
        #expect(set.stdout.hasSuffix(": offers of files are accepted without asking\n"), "\(set.stdout)")
        let source = pair.outbox + "/auto.bin"
        try TestFiles.random(source, size: 30_000)
        #expect(try pair.send(source).status == 0)
        try TestFiles.expectSame(source, pair.inbox + "/auto.bin")
        #expect(try pair.env.cli(pair.bob, ["auto-accept", "alice", "maybe"]).status == 2)
    }

    @Test func sendToAnUnknownPeerOrAMissingFileIsAClearError() throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        let missing = try pair.env.cli(pair.alice, ["send", pair.outbox + "/nope", "--to", "bob"])
        #expect(missing.status == 2)
        #expect(missing.stderr == "syncpeer: error: \(pair.outbox)/nope: no such file or folder\n")
        let source = pair.outbox + "/z"
        try "z".write(toFile: source, atomically: true, encoding: .utf8)
        let unknown = try pair.env.cli(pair.alice, ["send", source, "--to", "carol"])
        #expect(unknown.status == 3)
        #expect(unknown.stderr.hasPrefix("syncpeer: error: no known peer matches 'carol'"))
    }
}
