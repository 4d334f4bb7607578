import Foundation
import Glibc
import PeerCrypto
import PeerFiles
@testable import PeerNet
import PeerModel
import PeerWire
import Testing

/// Hostile folder peers against a real `syncpeer daemon` on loopback, speaking the real
/// frames (a `RogueSender`: real Noise handshake, paired by the daemon): a sharer whose
/// folder labels and index paths try to leave the receive folder, and a member that asks
/// for blocks of files it must not see. Each test checks what a user would: where folders
/// and files land, what is outside, what the member got, and that honest requests still work.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct HostileFolderTests {
    // MARK: 1. A hostile sharer

    /// Labels that are paths, dot names, hidden, bidirectional tricks, too long or empty:
    /// every auto-accepted folder is one new directory directly in the receive folder with
    /// a safe name, shown with that name; nothing appears anywhere else.
    @Test func sharedFolderLabelsAreNamesInsideTheReceiveFolder() throws {
        let bob = try HostileBob(autoAccept: true)
        defer { bob.env.cleanup() }
        let rogue = try bob.pairedRogue(name: "rogue-sharer")
        defer { rogue.close() }

        let labels = [
            "../../../../\(bob.token)", "Holiday photos/../../.ssh", "..", ".", "", "/tmp/\(bob.token)", ".\(bob.token)",
            "sub/dir", "report\u{202E}fdp.exe", "zero\u{200B}width", String(repeating: "日", count: 85),
        ]
        var folderIDs: [String] = []
        for (n, label) in labels.enumerated() {
            let id = "evil\(n)-\(bob.token.suffix(5))"
            folderIDs.append(id)
            try rogue.send(.shareOffer(folder: id, label: label))
        }
        // A folder ID that is a path is refused, never used as a name.
        let badID = "../../id-\(bob.token)"
        try rogue.send(.shareOffer(folder: badID, label: ""))
        let refusal = try rogue.take { if case .shareAnswer(badID, false, _) = $0 { true } else { false } }
        #expect(refusal == .shareAnswer(folder: badID, accepted: false, reason: "invalid folder ID"))

        for id in folderIDs {
            let answer = try rogue.take { if case .shareAnswer(id, _, _) = $0 { true } else { false } }
            #expect(answer == .shareAnswer(folder: id, accepted: true, reason: ""), "\(id)")
        }
        let made = try FileManager.default.contentsOfDirectory(atPath: bob.receive)
        #expect(made.count == labels.count, "\(made)")
        for name in made {
            try expectSafeName(name)
            var st = stat()
            #expect(lstat(bob.receive + "/" + name, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR, "\(name)")
        }
        #expect(made.contains("Holiday photos_.._.._.ssh"), "\(made)")

        // status and events show the safe names, with paths in the receive folder.
        let status = try bob.status()
        let folders = status["folders"] as? [[String: Any]] ?? []
        #expect(folders.count == labels.count)
        for folder in folders {
            let path = folder["path"] as? String ?? ""
            #expect(URL(fileURLWithPath: path).deletingLastPathComponent().path == bob.receive, "\(path)")
            try expectSafeName(folder["label"] as? String ?? "")
        }
        for event in bob.daemon.events("share_offer") { try expectSafeName(event["name"] as? String ?? "") }

        #expect(try bob.outsideListing() == bob.outsideBefore, "something was created outside the receive folder")
        #expect(bob.daemon.process.isRunning)
    }

    /// The issue's case with a plain `syncpeer accept`: a label `Holiday photos/../../.ssh`
    /// and then an index whose paths try to leave the folder. The accepted folder is made
    /// inside the receive folder, unsafe paths are ignored (and said so), and the one
    /// honest file arrives inside the folder, nowhere else.
    @Test func anAcceptedFolderAndItsIndexStayInsideTheReceiveFolder() throws {
        let bob = try HostileBob(autoAccept: false)
        defer { bob.env.cleanup() }
        let rogue = try bob.pairedRogueByUser(name: "rogue-ssh")
        defer { rogue.close() }

        let folderID = "holid-ays22"
        try rogue.send(.shareOffer(folder: folderID, label: "Holiday photos/../../.ssh"))
        let offer = try bob.daemon.waitFor("share_offer") { $0["folder"] as? String == folderID }
        #expect(offer["name"] as? String == "Holiday photos_.._.._.ssh")
        let accepted = try bob.env.cli(bob.daemon, ["accept", folderID, "--json"])
        try #require(accepted.status == 0, "\(accepted.stderr)")
        let folder = bob.receive + "/Holiday photos_.._.._.ssh"
        let answer = try JSONSerialization.jsonObject(with: Data(accepted.stdout.utf8)) as? [String: Any]
        #expect(answer?["path"] as? String == folder, "\(accepted.stdout)")
        #expect(try rogue.take { if case .shareAnswer(folderID, _, _) = $0 { true } else { false } }
            == .shareAnswer(folder: folderID, accepted: true, reason: ""))

        let key = try ForgedFile(chunks: [Array("ssh-ed25519 AAAA rogue@evil\n".utf8)])
        let device = DeviceID(publicKey: rogue.keyPair.publicKey).compact
        let unsafe = ["../authorized_keys", "../../.ssh/authorized_keys", "a/../../authorized_keys", "/\(bob.token)",
                      "./authorized_keys", "a//b", "a\\..\\..\\x"]
        var entries = unsafe.enumerated().map { n, path in Self.entry(path, key, sequence: UInt64(n + 1), device: device) }
        entries.append(Self.entry("authorized_keys", key, sequence: UInt64(unsafe.count + 1), device: device))
        try rogue.send(.indexUpdate(folder: folderID, full: true, entries: entries))

        // Bob pulls the honest entry from the rogue; the rogue answers its block requests.
        let arrived = folder + "/authorized_keys"
        let deadline = Date().addingTimeInterval(20)
        while !FileManager.default.fileExists(atPath: arrived) && Date() < deadline {
            guard let request = try? rogue.take(within: 0.2, where: { if case .blockRequest = $0 { true } else { false } }),
                  case let .blockRequest(id, _, path, offset, size, _) = request else { continue }
            #expect(path == "authorized_keys")
            #expect(offset == 0 && size == UInt32(key.content.count))
            try rogue.send(.blockResponse(request: id, ok: true, data: key.content))
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: arrived)) == Data(key.content))
        let unsafeReports = bob.daemon.events("error").filter { $0.reason.contains("unsafe path") }
        #expect(unsafeReports.count == unsafe.count, "\(unsafeReports)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: bob.receive) == ["Holiday photos_.._.._.ssh"])
        #expect(!FileManager.default.fileExists(atPath: bob.env.root.path + "/.ssh"))
        #expect(try bob.outsideListing() == bob.outsideBefore, "something was created outside the receive folder")
    }

    /// Control characters in a label never get in: the frame is refused at the wire and
    /// only that connection ends.
    @Test func aLabelWithControlCharactersEndsThatConnectionOnly() throws {
        let bob = try HostileBob(autoAccept: true)
        defer { bob.env.cleanup() }
        let rogue = try bob.pairedRogue(name: "rogue-escape")
        defer { rogue.close() }
        let folder = Array("ctrl1-aaaaa".utf8), label = Array("red\u{1B}[31m\n".utf8)
        let body = [UInt8(folder.count)] + folder + [UInt8(label.count)] + label
        try rogue.channel.sendRawPlaintext([FrameType.shareOffer.rawValue, 0, 0, 0, UInt8(body.count)] + body)
        #expect(rogue.waitUntilClosed(within: 5) != nil, "bob kept the connection open")
        #expect(try FileManager.default.contentsOfDirectory(atPath: bob.receive).isEmpty)
        #expect(bob.daemon.events("share_offer").isEmpty)
        #expect(!bob.daemon.events.contains { "\($0)".contains("\u{1B}") })
        #expect(bob.daemon.process.isRunning)
    }

    // MARK: 2. A hostile member

    /// A member asks for what it must not get: an ignored file (whole, as its hash is
    /// guessable), a file in an ignored folder, a file ignored after it was shared, a byte
    /// or an arbitrary range of a shared file, a real chunk's hash at another offset,
    /// unknown and escaping paths, a folder not shared with it. Every request is refused,
    /// the refusals are reported once, and the real chunks are still served, intact.
    @Test func aMemberGetsOnlyTheChunksOfSharedFiles() throws {
        let bob = try HostileBob(autoAccept: true)
        defer { bob.env.cleanup() }
        let docs = bob.env.home("docs")
        let other = bob.env.home("other")
        for dir in [docs + "/private", other] { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
        let secret = Array("password=hunter2-correct-horse".utf8)   // 30 bytes
        try Data(secret).write(to: URL(fileURLWithPath: docs + "/secret.txt"))
        try Data(secret).write(to: URL(fileURLWithPath: docs + "/private/key.pem"))
        try Data(secret).write(to: URL(fileURLWithPath: docs + "/later.txt"))
        try Data(secret).write(to: URL(fileURLWithPath: bob.env.root.path + "/outside.txt"))
        try "secret.txt\nprivate/\n".write(toFile: docs + "/.syncpeerignore", atomically: false, encoding: .utf8)
        try TestFiles.random(docs + "/public.bin", size: 600_000)
        try TestFiles.random(other + "/other.bin", size: 1_000)
        let publicBytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: docs + "/public.bin")))

        let rogue = try bob.pairedRogue(name: "rogue-member")
        defer { rogue.close() }
        let shared = try bob.env.cli(bob.daemon, ["share", docs, "--with", "rogue-member", "--json"])
        try #require(shared.status == 0, "\(shared.stderr)")
        let offer = try rogue.take { if case .shareOffer = $0 { true } else { false } }
        guard case let .shareOffer(folderID, _) = offer else { return }
        try rogue.send(.shareAnswer(folder: folderID, accepted: true, reason: ""))
        // Another folder bob has, shared with someone else, not with the rogue.
        let bystander = try bob.pairedRogue(name: "bystander")
        defer { bystander.close() }
        #expect(try bob.env.cli(bob.daemon, ["share", other, "--with", "bystander"]).status == 0)
        let otherOffer = try bystander.take { if case .shareOffer = $0 { true } else { false } }
        guard case let .shareOffer(otherID, _) = otherOffer else { return }

        let index = try Self.collectIndex(rogue, folder: folderID, until: ["public.bin", "later.txt"])
        #expect(index["secret.txt"] == nil && index["private/key.pem"] == nil, "ignored files were listed: \(index.keys)")
        let manifest = try Manifest.decode(try #require(index["public.bin"]).manifest)
        try #require(manifest.chunks.count >= 2, "public.bin has \(manifest.chunks.count) chunk(s)")
        let first = manifest.chunks[0], second = manifest.chunks[1]

        let probes: [(String, String, UInt64, UInt32, [UInt8])] = [
            ("the ignored file", "secret.txt", 0, 30, ChunkHash.of(secret).bytes),
            ("a file in an ignored folder", "private/key.pem", 0, 30, ChunkHash.of(secret).bytes),
            ("one byte of a shared file", "public.bin", 0, 1, ChunkHash.of(Array(publicBytes[0..<1])).bytes),
            ("an unaligned range", "public.bin", 1, 100, ChunkHash.of(Array(publicBytes[1..<101])).bytes),
            ("a real chunk's hash at another offset", "public.bin", first.offset, second.size, second.hash.bytes),
            ("a real chunk one byte short", "public.bin", first.offset, first.size - 1,
             ChunkHash.of(Array(publicBytes[Int(first.offset)..<Int(first.offset) + Int(first.size) - 1])).bytes),
            ("an unknown path", "nothing-here.txt", 0, 30, ChunkHash.of(secret).bytes),
            ("a path leaving the folder", "../outside.txt", 0, 30, ChunkHash.of(secret).bytes),
            ("the ignore file's own name", ".syncpeerignore", 0, 9, ChunkHash.of(Array("secret.tx".utf8)).bytes),
        ]
        var refused = 0
        for round in 0..<2 {
            for (what, path, offset, size, hash) in probes {
                #expect(try rogue.block(folderID, path, offset, size, hash) == nil, "served \(what) (round \(round))")
                refused += 1
            }
        }
        // A file shared first and ignored afterwards: its entry stays, its content is not served.
        let laterHash = ChunkHash.of(secret).bytes
        #expect(try rogue.block(folderID, "later.txt", 0, 30, laterHash) == secret, "a shared file is served")
        try "secret.txt\nprivate/\nlater.txt\n".write(toFile: docs + "/.syncpeerignore", atomically: false, encoding: .utf8)
        try FolderSyncTests.eventually("later.txt is no longer served", timeout: 10) {
            (try? rogue.block(folderID, "later.txt", 0, 30, laterHash)) == nil
        }
        refused += 1
        let otherFile = try [UInt8](Data(contentsOf: URL(fileURLWithPath: other + "/other.bin")))
        #expect(try rogue.block(otherID, "other.bin", 0, 1_000, ChunkHash.of(otherFile).bytes) == nil, "served a folder not shared with it")
        refused += 1

        // Still served: every real chunk, intact.
        var assembled: [UInt8] = []
        for chunk in manifest.chunks {
            let bytes = try rogue.block(folderID, "public.bin", chunk.offset, chunk.size, chunk.hash.bytes)
            assembled += try #require(bytes, "chunk at \(chunk.offset) refused")
        }
        #expect(assembled == publicBytes)

        // Reported once, not once per request.
        let reports = try waitForReports(bob.daemon, peer: "rogue-member", atLeast: 1)
        #expect(refused > 16)
        #expect(reports.count == 1, "\(reports)")
        #expect(reports.first?.reason.contains("block requests") == true, "\(reports)")
        #expect(bob.daemon.process.isRunning)
    }

    // MARK: 3. A peer that answers for another

    /// A block response from a peer that was not asked (a guessed request ID) is dropped:
    /// the request still takes the asked peer's answer, and the file arrives. (Before, the
    /// forged answer removed the request without settling it, and the folder's pulls
    /// waited for ever.)
    @Test func anAnswerFromAPeerThatWasNotAskedSettlesNothing() throws {
        let bob = try HostileBob(autoAccept: true)
        defer { bob.env.cleanup() }
        let sharer = try bob.pairedRogue(name: "rogue-sharer")
        defer { sharer.close() }
        let other = try bob.pairedRogue(name: "rogue-other")
        defer { other.close() }
        let folderID = "answe-rsabc"
        try sharer.send(.shareOffer(folder: folderID, label: "answers"))
        #expect(try sharer.take { if case .shareAnswer(folderID, _, _) = $0 { true } else { false } }
            == .shareAnswer(folder: folderID, accepted: true, reason: ""))
        let file = try ForgedFile(chunks: [Array("the asked peer's content\n".utf8)])
        let device = DeviceID(publicKey: sharer.keyPair.publicKey).compact
        try sharer.send(.indexUpdate(folder: folderID, full: true, entries: [Self.entry("a.txt", file, sequence: 1, device: device)]))
        let request = try sharer.take(within: 10) { if case .blockRequest = $0 { true } else { false } }
        guard case let .blockRequest(id, _, _, _, _, _) = request else { Issue.record("no block request"); return }
        // Another paired peer answers first, with the right bytes even; then the asked one.
        try other.send(.blockResponse(request: id, ok: true, data: file.content))
        Thread.sleep(forTimeInterval: 0.3)
        try sharer.send(.blockResponse(request: id, ok: true, data: file.content))
        let arrived = bob.receive + "/answers/a.txt"
        try FolderSyncTests.eventually("a.txt arrives with the asked peer's answer", timeout: 10) {
            FileManager.default.fileExists(atPath: arrived)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: arrived)) == Data(file.content))
    }

    // MARK: 4. Content that comes with the index

    /// Small files' content that a member sends with its index page (`indexBlocks`) is
    /// taken only for an entry of that page whose single chunk it hashes to: a block that
    /// matches is written without a request; one of the right size with other bytes is
    /// dropped and the file is asked for. Content is for the next page only: a page that
    /// does not want it uses it up, and the page after it gets none. Every file arrives with
    /// the bytes its manifest names.
    @Test func contentWithTheIndexIsTakenOnlyWhereItMatches() throws {
        let bob = try HostileBob(autoAccept: true)
        defer { bob.env.cleanup() }
        let sharer = try bob.pairedRogue(name: "rogue-sharer", features: ["messages", "index-blocks"])
        defer { sharer.close() }
        let folderID = "inlin-eabcd"
        try sharer.send(.shareOffer(folder: folderID, label: "inline"))
        #expect(try sharer.take { if case .shareAnswer(folderID, _, _) = $0 { true } else { false } }
            == .shareAnswer(folder: folderID, accepted: true, reason: ""))
        let device = DeviceID(publicKey: sharer.keyPair.publicKey).compact
        let good = try ForgedFile(chunks: [Array("content that came with the index\n".utf8)])
        let asked = try ForgedFile(chunks: [Array("content that had to be asked for\n".utf8)])
        var lie = asked.content
        lie[0] ^= 0x20
        try sharer.send(.indexBlocks(folder: folderID, blocks: [good.content, lie]))
        try sharer.send(.indexUpdate(folder: folderID, full: true, entries: [
            Self.entry("good.txt", good, sequence: 1, device: device), Self.entry("asked.txt", asked, sequence: 2, device: device),
        ]))
        try answerOne(sharer, expecting: "asked.txt", with: asked.content)
        // The third file's content comes before a page that does not hold it; the page after
        // holds it, and asks for it.
        let third = try ForgedFile(chunks: [Array("a third file, sent a page early!\n".utf8)])
        let fourth = try ForgedFile(chunks: [Array("a fourth file, sent without data\n".utf8)])
        try sharer.send(.indexBlocks(folder: folderID, blocks: [third.content]))
        try sharer.send(.indexUpdate(folder: folderID, full: false, entries: [Self.entry("fourth.txt", fourth, sequence: 3, device: device)]))
        try answerOne(sharer, expecting: "fourth.txt", with: fourth.content)
        try sharer.send(.indexUpdate(folder: folderID, full: false, entries: [Self.entry("third.txt", third, sequence: 4, device: device)]))
        try answerOne(sharer, expecting: "third.txt", with: third.content)
        for (name, file) in [("good.txt", good), ("asked.txt", asked), ("third.txt", third), ("fourth.txt", fourth)] {
            let arrived = bob.receive + "/inline/" + name
            try FolderSyncTests.eventually("\(name) arrives", timeout: 10) { FileManager.default.fileExists(atPath: arrived) }
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: arrived))) == file.content)
        }
        #expect(sharer.pending.filter { if case .blockRequest = $0 { true } else { false } }.isEmpty, "\(sharer.pending)")
        #expect(bob.daemon.process.isRunning)
    }

    // MARK: 5. Ignore patterns are local

    /// A member that edits bob's `.syncpeerignore` (an entry whose version is bob's and one
    /// change on top, with empty rules) changes nothing here: bob never lists his ignore file,
    /// never asks for the member's, keeps his own byte for byte, and after a restart (a full
    /// rescan) still neither lists nor serves the file his patterns keep private. Before, the
    /// newer entry won, bob wrote it over his own, and the restart indexed and served the secret.
    @Test func aMembersIgnoreFileIsNeverApplied() throws {
        let bob = try HostileBob(autoAccept: true)
        defer { bob.env.cleanup() }
        let docs = bob.env.home("docs")
        try FileManager.default.createDirectory(atPath: docs, withIntermediateDirectories: true)
        let secret = Array("-----BEGIN PRIVATE KEY----- hunter2".utf8)
        try Data(secret).write(to: URL(fileURLWithPath: docs + "/key.secret"))
        let rules = "# stays on this machine\nkey.secret\n"
        try rules.write(toFile: docs + "/.syncpeerignore", atomically: false, encoding: .utf8)
        try "shared".write(toFile: docs + "/public.txt", atomically: false, encoding: .utf8)

        let rogue = try bob.pairedRogue(name: "rogue-member")
        let shared = try bob.env.cli(bob.daemon, ["share", docs, "--with", "rogue-member", "--json"])
        try #require(shared.status == 0, "\(shared.stderr)")
        let offer = try rogue.take { if case .shareOffer = $0 { true } else { false } }
        guard case let .shareOffer(folderID, _) = offer else { return }
        try rogue.send(.shareAnswer(folder: folderID, accepted: true, reason: ""))
        let listed = try Self.collectIndex(rogue, folder: folderID, until: ["public.txt"])
        #expect(listed[".syncpeerignore"] == nil, "bob listed his ignore file: \(listed.keys.sorted())")

        // The member's edit of the ignore file (bob's version and one change on top, as an
        // honest edit would be, when bob lists it): no rules at all.
        let device = DeviceID(publicKey: rogue.keyPair.publicKey).compact
        let empty = try ForgedFile(chunks: [Array("# nothing is private\n".utf8)])
        var entry = Self.entry(".syncpeerignore", empty, sequence: 1, device: device)
        entry.version = (listed[".syncpeerignore"]?.version ?? [:]).merged(with: [device: 1])
        try rogue.send(.indexUpdate(folder: folderID, full: true, entries: [entry]))
        if let asked = try? rogue.take(within: 3, where: { if case .blockRequest = $0 { true } else { false } }),
           case let .blockRequest(id, _, path, _, _, _) = asked {
            Issue.record("bob asked the member for \(path)")
            try rogue.send(.blockResponse(request: id, ok: true, data: empty.content))
            Thread.sleep(forTimeInterval: 1)
        }
        #expect(try String(contentsOfFile: docs + "/.syncpeerignore", encoding: .utf8) == rules)
        rogue.close()

        // A restart scans the whole folder with the patterns on disk.
        #expect(bob.daemon.stop() == 0)
        let again = try DaemonProcess(bob.env, name: "bob", home: bob.daemon.home,
                                      arguments: ["--auto-accept", "--receive-dir", bob.receive])
        let back = try RogueSender(port: again.port, name: "rogue-member", keyPair: rogue.keyPair)
        defer { back.close() }
        try again.waitForState("connected", peer: "rogue-member")
        // The folder is offered again on every connection; the member takes it again.
        _ = try back.take { if case .shareOffer(folderID, _) = $0 { true } else { false } }
        try back.send(.shareAnswer(folder: folderID, accepted: true, reason: ""))
        let relisted = try Self.collectIndex(back, folder: folderID, until: ["public.txt"])
        #expect(relisted["key.secret"] == nil, "the secret was indexed: \(relisted.keys.sorted())")
        #expect(try back.block(folderID, "key.secret", 0, UInt32(secret.count), ChunkHash.of(secret).bytes) == nil,
                "the secret was served")
        #expect(again.stop() == 0)
    }

    /// Takes the next block request, which must be for `path`, and answers it with `data`.
    private func answerOne(_ rogue: RogueSender, expecting path: String, with data: [UInt8],
                           sourceLocation: SourceLocation = #_sourceLocation) throws {
        let request = try rogue.take(within: 10) { if case .blockRequest = $0 { true } else { false } }
        guard case let .blockRequest(id, _, asked, _, _, _) = request else { return }
        #expect(asked == path, sourceLocation: sourceLocation)
        try rogue.send(.blockResponse(request: id, ok: true, data: data))
    }

    // MARK: - Helpers

    func expectSafeName(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(throws: Never.self, sourceLocation: sourceLocation) { try SafePath.validateName(name) }
        #expect(name.utf8.first != UInt8(ascii: "."), "hidden: \(name.debugDescription)", sourceLocation: sourceLocation)
        #expect(name.utf8.count <= 128, "\(name.utf8.count) bytes", sourceLocation: sourceLocation)
        let unsafe = name.unicodeScalars.filter {
            [.control, .format, .lineSeparator, .paragraphSeparator].contains($0.properties.generalCategory)
        }
        #expect(unsafe.isEmpty, "\(name.debugDescription)", sourceLocation: sourceLocation)
    }

    /// Index entry of a live file with `file`'s content.
    static func entry(_ path: String, _ file: ForgedFile, sequence: UInt64, device: String) -> SyncFileEntry {
        SyncFileEntry(FileEntry(path: path, kind: .file, size: Int64(file.manifest.fileSize), mtimeNs: 1_600_000_000_000_000_000,
                                mode: 0o644, version: [device: sequence], rootHash: file.manifest.rootHash, modifiedBy: device,
                                sequence: Int64(sequence)),
                      manifest: file.manifest.encode())
    }

    /// The daemon's index entries of a folder, by path, once all of `paths` arrived.
    static func collectIndex(_ rogue: RogueSender, folder: String, until paths: Set<String>) throws -> [String: SyncFileEntry] {
        var found: [String: SyncFileEntry] = [:]
        while !paths.isSubset(of: found.keys) {
            let frame = try rogue.take { if case .indexUpdate(folder, _, _) = $0 { true } else { false } }
            guard case let .indexUpdate(_, _, entries) = frame else { continue }
            for entry in entries { found[entry.path] = entry }
        }
        return found
    }

    func waitForReports(_ daemon: DaemonProcess, peer: String, atLeast count: Int) throws -> [[String: Any]] {
        try FolderSyncTests.eventually("\(count) refusal report(s)") {
            daemon.events("refused").filter { $0.peerName == peer }.count >= count
        }
        Thread.sleep(forTimeInterval: 0.5)   // a second report would come now
        return daemon.events("refused").filter { $0.peerName == peer }
    }
}

/// Bob: a daemon receiving folders into `<root>/bob-recv`, pairing rogues automatically or
/// by its user.
struct HostileBob {
    let env: SyncpeerRunner
    let daemon: DaemonProcess
    let receive: String
    /// Part of every name a test uses to leave the receive folder, to look for it outside.
    let token = "escape-\(UInt32.random(in: 0...UInt32.max))"
    /// `outsideListing()` when bob started.
    private(set) var outsideBefore: [String] = []

    init(autoAccept: Bool, environment: [String: String] = [:]) throws {
        env = try SyncpeerRunner()
        receive = env.home("bob-recv")
        try FileManager.default.createDirectory(atPath: receive, withIntermediateDirectories: true)
        daemon = try DaemonProcess(env, name: "bob", arguments: (autoAccept ? ["--auto-accept"] : []) + ["--receive-dir", receive],
                                   environment: environment.merging(["SYNCPEER_WATCH_DELAY_MS": "100"]) { given, _ in given })
        outsideBefore = try outsideListing()
    }

    func pairedRogue(name: String, features: [String] = ["messages"]) throws -> RogueSender {
        let rogue = try RogueSender(port: daemon.port, name: name, features: features)
        try rogue.expectPairedByAutoAccept()
        try daemon.waitForState("connected", peer: name)
        return rogue
    }

    func pairedRogueByUser(name: String) throws -> RogueSender {
        let rogue = try RogueSender(port: daemon.port, name: name)
        let invitation = try daemon.waitFor("invitation") { $0.peerName == name }
        let id = try #require(invitation["invitation"] as? String)
        let accepted = try env.cli(daemon, ["accept", id])
        try #require(accepted.status == 0, "\(accepted.stderr)")
        #expect(try rogue.take { if case .pairing = $0 { true } else { false } } == .pairing(.pending))
        #expect(try rogue.take { if case .pairing = $0 { true } else { false } } == .pairing(.accepted))
        try daemon.waitForState("connected", peer: name)
        return rogue
    }

    /// `syncpeer status --json`: its pages (one object a line) as one, folders and offers joined.
    func status() throws -> [String: Any] {
        let result = try env.cli(daemon, ["status", "--json"])
        try #require(result.status == 0, "\(result.stderr)")
        var folders: [Any] = [], offers: [Any] = []
        for line in result.stdout.split(separator: "\n") {
            let page = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            folders += page["folders"] as? [Any] ?? []
            offers += page["offers"] as? [Any] ?? []
        }
        return ["folders": folders, "offers": offers]
    }

    /// Everything below the test's root except the receive folder and bob's home, plus
    /// the entries of the root's parents up to "/" that contain `token`: what a label or
    /// path that leaves the receive folder would change.
    func outsideListing() throws -> [String] {
        var out: [String] = []
        let root = env.root.path
        if let walker = FileManager.default.enumerator(atPath: root) {
            while let relative = walker.nextObject() as? String {
                if relative == "bob-recv" || relative.hasPrefix("bob-recv/") || relative == "bob" || relative.hasPrefix("bob/") { continue }
                out.append(relative)
            }
        }
        var parent = URL(fileURLWithPath: root).deletingLastPathComponent()
        while true {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: parent.path)) ?? [] where name.contains(token) {
                out.append(parent.path + "/" + name)
            }
            if parent.path == "/" { break }
            parent = parent.deletingLastPathComponent()
        }
        return out.sorted()
    }
}

extension RogueSender {
    /// Asks for a block of a folder; the bytes, or nil when refused.
    func block(_ folder: String, _ path: String, _ offset: UInt64, _ size: UInt32, _ hash: [UInt8]) throws -> [UInt8]? {
        let request = UInt32.random(in: 1...UInt32.max)
        try send(.blockRequest(request: request, folder: folder, path: path, offset: offset, size: size, hash: hash))
        let answer = try take { if case .blockResponse(request, _, _) = $0 { true } else { false } }
        guard case let .blockResponse(_, ok, data) = answer else { return nil }
        return ok ? data : nil
    }
}
