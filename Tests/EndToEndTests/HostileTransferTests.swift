import Foundation
import Glibc
import PeerCrypto
import PeerFiles
@testable import PeerNet
import PeerWire
import Testing

/// Hostile senders of files against a real `syncpeer daemon` on loopback: a rogue peer with
/// a real Noise handshake (paired through `--auto-accept`, or not paired at all) offers
/// names that would leave the receive folder, manifests that lie, and chunks that fail
/// verification. Each test checks what a user would: no file where it must not be, clear
/// events, and the daemon still receiving a real file from its paired peer afterwards.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct HostileTransferTests {
    // MARK: 1. Path traversal and hostile names

    struct HostileName: CustomStringConvertible {
        let kind: TransferOffer.Kind
        /// The folder entry path (folder) or the offer name (file).
        let text: String
        /// What the decline reason must say.
        let rule: String
        var description: String { "\(kind == .folder ? "entry" : "file name") \(text.count > 40 ? String(text.prefix(12)) + "…(\(text.utf8.count) bytes)" : text)" }
    }

    /// A folder whose entries collide (the same path twice, or a file that is also a parent
    /// folder of another entry) is declined before anything is written.
    @Test func folderOffersWithCollidingEntriesAreDeclined() throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        let rogue = try pairedRogue(pair, name: "rogue-collide")
        defer { rogue.close() }
        let file = try ForgedFile(chunkSizes: [500])
        for (paths, rule) in [(["x", "x"], "appears twice"), (["a", "a/b"], "both a file and a folder"),
                              (["d/e/f", "d/e"], "both a file and a folder")] {
            let offer = TransferOffer(id: .random(), kind: .folder, name: "box", entries: paths.map { file.entry(path: $0) })
            try rogue.send(.offer(offer))
            let answer = try rogue.next(offer.id)
            guard case let .decline(_, reason) = answer else {
                Issue.record("\(paths): expected a decline, got \(answer)")
                continue
            }
            #expect(reason.contains(rule), "\(paths): '\(reason)'")
        }
        #expect(listing(pair.inbox).isEmpty, "INBOX: \(listing(pair.inbox))")
    }

    @Test func offersWithNamesThatLeaveTheFolderAreDeclinedAndWriteNothing() throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        let parent = pair.env.root.path
        let parentBefore = listing(parent)
        let etcEvilExisted = FileManager.default.fileExists(atPath: "/etc/evil.txt")
        let rogue = try pairedRogue(pair, name: "rogue-names")
        defer { rogue.close() }

        let cases: [HostileName] = [
            .init(kind: .folder, text: "../evil.txt", rule: "component 1 is \"..\""),
            .init(kind: .folder, text: "a/../../evil.txt", rule: "component 2 is \"..\""),
            .init(kind: .folder, text: "/etc/evil.txt", rule: "absolute"),
            .init(kind: .folder, text: parent + "/evil-absolute.txt", rule: "absolute"),
            .init(kind: .folder, text: "./x", rule: "component 1 is \".\""),
            .init(kind: .folder, text: "a//b", rule: "component 2 is empty"),
            .init(kind: .folder, text: "a/", rule: "component 2 is empty"),
            .init(kind: .folder, text: "ok/" + String(repeating: "e", count: 300), rule: "component 2 is 300 bytes long, the limit is 255"),
            .init(kind: .folder, text: "..\\evil.txt", rule: "backslash"),
            .init(kind: .file, text: "../x", rule: "component 1 is \"..\""),
            .init(kind: .file, text: ".", rule: "component 1 is \".\""),
            .init(kind: .file, text: "..", rule: "component 1 is \"..\""),
            .init(kind: .file, text: "sub/x", rule: "a file name is a single component"),
        ]
        let file = try ForgedFile(chunkSizes: [1_000])
        for hostile in cases {
            let eventsBefore = pair.bob.events.count
            let offer: TransferOffer
            if hostile.kind == .folder {
                // A harmless first entry: one bad entry must refuse the whole offer.
                offer = TransferOffer(id: .random(), kind: .folder, name: "box",
                                      entries: [file.entry(path: "fine.txt"), file.entry(path: hostile.text)])
            } else {
                offer = TransferOffer(id: .random(), kind: .file, name: hostile.text, entries: [file.entry(path: hostile.text)])
            }
            try rogue.send(.offer(offer))
            let answer = try rogue.next(offer.id)
            guard case let .decline(_, reason) = answer else {
                Issue.record("\(hostile): expected a decline, got \(answer)")
                continue
            }
            #expect(reason.contains(hostile.rule), "\(hostile): decline reason '\(reason)'")
            let error = try pair.bob.waitFor("error", after: eventsBefore) { $0.peerName == rogue.name }
            #expect(error.reason.hasPrefix("refused an offer from \(rogue.name)"), "\(error)")
            #expect(error.reason.contains(hostile.rule), "\(hostile): error event '\(error.reason)'")
            // Chunks for the declined offer are ignored: no ack, nothing written.
            try rogue.send(.chunk(id: offer.id, index: 0, data: file.chunks[0]),
                           .chunk(id: offer.id, index: 1, data: file.chunks[0]))
        }
        Thread.sleep(forTimeInterval: 0.5)
        #expect(rogue.pending.filter { $0.transferID != nil }.isEmpty, "unexpected answers: \(rogue.pending)")
        #expect(pair.bob.events("offer").isEmpty, "a hostile offer reached the user: \(pair.bob.events("offer"))")
        #expect(!pair.bob.events("transfer").contains { $0.peerName == rogue.name })
        #expect(listing(pair.inbox).isEmpty, "INBOX: \(listing(pair.inbox))")
        #expect(listing(parent) == parentBefore)
        #expect(try treeNames(parent).filter { $0.contains("evil") }.isEmpty, "an 'evil' file appeared")
        if !etcEvilExisted { #expect(!FileManager.default.fileExists(atPath: "/etc/evil.txt")) }

        // NUL and other control characters cannot even be encoded by the wire layer.
        for bad in ["evil\u{0}.txt", "a/\u{0}/b", "\u{1B}[2Jevil", "line\nbreak", "del\u{7F}"] {
            let asName = TransferOffer(id: .random(), kind: .file, name: bad, entries: [file.entry(path: "x")])
            #expect(throws: WireError.controlCharacter(field: "offer name")) { try Frame.offer(asName).validate() }
            let asPath = TransferOffer(id: .random(), kind: .folder, name: "box", entries: [file.entry(path: bad)])
            #expect(throws: WireError.controlCharacter(field: "entry path")) { try Frame.offer(asPath).validate() }
            #expect(throws: NetError.self) { try rogue.send(.offer(asName)) }
        }
        // Forced onto the wire anyway (a valid offer with a NUL patched into its name), the
        // receiver's decoder refuses the frame and closes that connection.
        let patched = TransferOffer(id: .random(), kind: .file, name: "aXb", entries: [file.entry(path: "aXb")])
        var bytes = FrameEncoder.encode(.offer(patched))
        // Header (5) ‖ id (16) ‖ kind (1) ‖ name length (1) ‖ name: "X" is byte 24.
        #expect(bytes[24] == UInt8(ascii: "X"))
        bytes[24] = 0
        try rogue.channel.sendRawPlaintext(bytes)
        #expect(rogue.waitUntilClosed(within: 5) != nil, "bob kept the connection open after a NUL in an offer name")
        let closed = try pair.bob.waitFor("state") { $0.peerName == rogue.name && $0["state"] as? String == "notConnected" }
        #expect(closed.reason.contains("protocol violation"), "\(closed)")
        #expect(listing(pair.inbox).isEmpty)

        try expectBobStillReceives(pair, tag: "names")
    }

    // MARK: 2. A symbolic link in the receive folder

    @Test func aLinkInTheReceiveFolderIsNeverFollowed() throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        let outside = pair.env.home("outside")
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: pair.inbox + "/link", withDestinationPath: outside)
        let rogue = try pairedRogue(pair, name: "rogue-link")
        defer { rogue.close() }

        // A file named like the link.
        let file = try ForgedFile(chunkSizes: [40_000, 2_000])
        let fileOffer = file.offer(name: "link")
        try deliver(file, as: fileOffer, by: rogue)

        // A folder named like the link, with an entry inside it.
        let inner = try ForgedFile(chunkSizes: [5_000])
        let folderOffer = TransferOffer(id: .random(), kind: .folder, name: "link", entries: [inner.entry(path: "x.txt")])
        try deliver([inner], as: folderOffer, by: rogue)

        #expect(listing(outside).isEmpty, "written through the link: \(listing(outside))")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: pair.inbox + "/link") == outside, "the link was replaced")
        #expect(listing(pair.inbox) == ["link", "link (1)", "link (2)"], "\(listing(pair.inbox))")
        #expect(kind(pair.inbox + "/link (1)") == S_IFREG)
        #expect(try contents(pair.inbox + "/link (1)") == file.content)
        #expect(kind(pair.inbox + "/link (2)") == S_IFDIR)
        #expect(try contents(pair.inbox + "/link (2)/x.txt") == inner.content)
        // Each transfer event names where the result went.
        // (The second event may follow its folder's placing by a moment.)
        func completedPaths() -> [String] {
            pair.bob.events("transfer").filter { $0["state"] as? String == "completed" }.compactMap { $0["path"] as? String }
        }
        try? FolderSyncTests.eventually("both transfers reported completed") { completedPaths().count >= 2 }
        #expect(completedPaths() == [pair.inbox + "/link (1)", pair.inbox + "/link (2)"], "\(completedPaths())")

        try expectBobStillReceives(pair, tag: "link")
        #expect(listing(outside).isEmpty)
    }

    // MARK: 3. A bad chunk, then the truth

    @Test func aChunkThatFailsVerificationIsAskedForAgainAndTheFileArrivesIntact() throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        let rogue = try pairedRogue(pair, name: "rogue-liar")
        defer { rogue.close() }

        let file = try ForgedFile(chunkSizes: [70_000, 70_000, 70_000])
        #expect(file.manifest.fileSize == 210_000)
        let offer = file.offer(name: "honest-looking.bin")
        try rogue.send(.offer(offer))
        let accept = try rogue.next(offer.id)
        #expect(accept == .accept(id: offer.id, have: [0]), "\(accept)")

        var tampered = file.chunks[1]
        tampered[12_345] ^= 0x5A
        try rogue.send(.chunk(id: offer.id, index: 1, data: tampered))
        #expect(try rogue.next(offer.id) == .chunkAck(id: offer.id, index: 1, ok: false))
        let error = try pair.bob.waitFor("error") { $0.peerName == rogue.name }
        #expect(error.reason.contains("chunk 1 of honest-looking.bin failed verification"), "\(error)")
        // Nothing is in place yet.
        #expect(!FileManager.default.fileExists(atPath: pair.inbox + "/honest-looking.bin"))

        for index in 0..<3 {
            try rogue.send(.chunk(id: offer.id, index: UInt32(index), data: file.chunks[index]))
        }
        var acked: [UInt32] = []
        for _ in 0..<3 {
            let ack = try rogue.next(offer.id)
            guard case let .chunkAck(_, index, ok) = ack, ok else {
                Issue.record("expected an ok ack, got \(ack)")
                break
            }
            acked.append(index)
        }
        #expect(acked.sorted() == [0, 1, 2])
        #expect(try rogue.next(offer.id) == .done(id: offer.id, ok: true, reason: ""))

        let received = pair.inbox + "/honest-looking.bin"
        #expect(try contents(received) == file.content, "the file in INBOX is not the true content")
        #expect(try TestFiles.meta(received) == .init(size: 210_000, mode: 0o640, mtime: 1_600_000_000_000_000_000))
        #expect(!FileManager.default.fileExists(atPath: pair.inbox + "/.syncpeer-partial"))
        let completed = try pair.bob.waitFor("transfer") { $0["transfer"] as? String == offer.id.description && $0["state"] as? String == "completed" }
        #expect((completed["resent"] as? NSNumber)?.intValue == 70_000, "the bad chunk counts as resent bytes: \(completed)")
        #expect(pair.bob.events("error").filter { $0.peerName == rogue.name }.count == 1)

        try expectBobStillReceives(pair, tag: "liar")
    }

    // MARK: 4. A sender that never tells the truth

    @Test func aSenderThatKeepsFailingVerificationIsStoppedAndNothingIsPutInPlace() throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        let rogue = try pairedRogue(pair, name: "rogue-persistent")
        defer { rogue.close() }

        let file = try ForgedFile(chunkSizes: [70_000, 70_000, 70_000])
        let offer = file.offer(name: "never-true.bin")
        try rogue.send(.offer(offer))
        #expect(try rogue.next(offer.id) == .accept(id: offer.id, have: [0]))
        // Chunks 1 and 2 are true: 140,000 bytes land in the partial file.
        try rogue.send(.chunk(id: offer.id, index: 1, data: file.chunks[1]), .chunk(id: offer.id, index: 2, data: file.chunks[2]))
        #expect(try rogue.next(offer.id) == .chunkAck(id: offer.id, index: 1, ok: true))
        #expect(try rogue.next(offer.id) == .chunkAck(id: offer.id, index: 2, ok: true))

        var rejected = 0
        var cancelReason: String?
        for attempt in 1...20 {
            var wrong = file.chunks[0]
            wrong[attempt] ^= 0xFF
            try rogue.send(.chunk(id: offer.id, index: 0, data: wrong))
            let answer = try rogue.next(offer.id)
            if answer == .chunkAck(id: offer.id, index: 0, ok: false) {
                rejected += 1
            } else if case let .cancel(_, reason) = answer {
                cancelReason = reason
                break
            } else {
                Issue.record("attempt \(attempt): unexpected \(answer)")
                break
            }
        }
        #expect(rejected == 8, "bad chunks tolerated before the stop (maxBadChunks)")
        #expect(cancelReason == "too many chunks failed verification")

        let failed = try pair.bob.waitFor("transfer") { $0["transfer"] as? String == offer.id.description && $0["state"] as? String == "failed" }
        #expect(failed.reason.contains("sent 9 chunks that failed verification"), "\(failed)")
        #expect(failed.reason.contains("nothing was put in place"), "\(failed)")
        #expect(pair.bob.events("error").filter { $0.peerName == rogue.name && $0.reason.contains("failed verification") }.count == 8)

        // The truth, too late: ignored.
        for index in 0..<3 {
            try rogue.send(.chunk(id: offer.id, index: UInt32(index), data: file.chunks[index]))
        }
        Thread.sleep(forTimeInterval: 0.5)
        #expect(rogue.pending.filter { $0.transferID == offer.id }.isEmpty, "\(rogue.pending)")

        // No file under the offered name, and no partial data left behind: the transfer
        // failed for good (it is never resumed), so its bytes would only fill the disk.
        let names = try treeNames(pair.inbox)
        #expect(!names.contains { ($0 as NSString).lastPathComponent.hasPrefix("never-true") }, "\(names)")
        #expect(names.allSatisfy { $0 == ".syncpeer-partial" }, "partial data left behind: \(names)")

        let listed = try transfersJSON(pair.env, pair.bob)
        let entry = try #require(listed.first { $0["transfer"] as? String == offer.id.description }, "\(listed)")
        #expect(entry["state"] as? String == "failed", "\(entry)")
        #expect(entry["direction"] as? String == "receive")
        #expect(entry.reason.contains("failed verification"), "\(entry)")

        try expectBobStillReceives(pair, tag: "persistent")
    }

    // MARK: 5. A manifest whose root does not name its chunks

    @Test func aManifestWhoseRootDoesNotMatchItsChunksIsDeclinedAtOnce() throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        let rogue = try pairedRogue(pair, name: "rogue-root")
        defer { rogue.close() }
        let file = try ForgedFile(chunkSizes: [70_000, 70_000, 70_000])
        // The forgeries still decode as far as the root check (same length, same sizes).
        #expect(throws: ManifestError.rootHashMismatch) { try Manifest.decode(file.manifestWithForgedChunkHash) }
        #expect(throws: ManifestError.rootHashMismatch) { try Manifest.decode(file.manifestWithForgedRoot) }

        let forgeries: [(String, TransferOffer)] = [
            ("a chunk hash changed", TransferOffer(id: .random(), kind: .file, name: "forged-chunk.bin",
                                                   entries: [file.entry(path: "forged-chunk.bin", manifest: file.manifestWithForgedChunkHash)])),
            ("the root changed", TransferOffer(id: .random(), kind: .file, name: "forged-root.bin",
                                               entries: [file.entry(path: "forged-root.bin", manifest: file.manifestWithForgedRoot)])),
            ("the second entry of a folder", TransferOffer(id: .random(), kind: .folder, name: "forged-folder", entries: [
                file.entry(path: "good.bin"), file.entry(path: "bad.bin", manifest: file.manifestWithForgedRoot)])),
        ]
        for (what, offer) in forgeries {
            try rogue.send(.offer(offer))
            let answer = try rogue.next(offer.id, within: 2)
            guard case let .decline(_, reason) = answer else {
                Issue.record("\(what): expected a decline, got \(answer)")
                continue
            }
            #expect(reason.contains("manifest root hash does not match its chunks"), "\(what): \(reason)")
            try pair.bob.waitFor("error") { $0.peerName == rogue.name && $0.reason.contains("manifest root hash") && $0.reason.contains("refused an offer") }
        }
        // The decline can reach the rogue before bob's event line reaches the test: wait for all three.
        let deadline = Date().addingTimeInterval(10)
        while pair.bob.events("error").filter({ $0.peerName == rogue.name }).count < 3 && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(pair.bob.events("error").filter { $0.peerName == rogue.name }.count == 3)
        #expect(pair.bob.events("offer").isEmpty, "a forged offer reached the user")
        #expect(listing(pair.inbox).isEmpty, "\(listing(pair.inbox))")

        // The same file with its true manifest is accepted: the root was the only problem.
        let truthful = file.offer(name: "forged-chunk.bin")
        try deliver(file, as: truthful, by: rogue)
        #expect(listing(pair.inbox) == ["forged-chunk.bin"])
        try expectBobStillReceives(pair, tag: "root")
    }

    // MARK: 6. Sizes that lie, indices out of range

    @Test func sizesThatLieAreRefusedAndOutOfRangeChunksAreIgnored() throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        let rogue = try pairedRogue(pair, name: "rogue-sizes")
        defer { rogue.close() }
        let file = try ForgedFile(chunkSizes: [70_000, 70_000, 70_000])

        // a. The entry's size is not its manifest's file size.
        for size: UInt64 in [210_001, 209_999, 0, UInt64.max] {
            let offer = TransferOffer(id: .random(), kind: .file, name: "size-\(size).bin",
                                      entries: [file.entry(path: "size-\(size).bin", size: size)])
            try rogue.send(.offer(offer))
            let answer = try rogue.next(offer.id)
            guard case let .decline(_, reason) = answer else {
                Issue.record("size \(size): expected a decline, got \(answer)")
                continue
            }
            #expect(reason.contains("manifest size differs from the entry size"), "size \(size): \(reason)")
        }
        #expect(pair.bob.events("offer").isEmpty)

        // b. Chunks whose length is not the manifest's chunk size fail verification and count
        // as bad chunks: eight are answered "not ok", the ninth stops the transfer.
        let short = file.offer(name: "wrong-lengths.bin")
        try rogue.send(.offer(short))
        #expect(try rogue.next(short.id) == .accept(id: short.id, have: [0]))
        let wrongLengths: [[UInt8]] = [
            Array(file.chunks[0].dropLast()), file.chunks[0] + [0], [], Array(file.chunks[0].prefix(1)),
            file.chunks[0] + file.chunks[1], Array(file.chunks[0].dropLast(100)), file.chunks[0] + [1, 2, 3],
            Array(file.chunks[0].dropFirst()), file.chunks[0] + [9],
        ]
        var answers: [Frame] = []
        for data in wrongLengths {
            try rogue.send(.chunk(id: short.id, index: 0, data: data))
            let answer = try rogue.next(short.id)
            answers.append(answer)
            if case .cancel = answer { break }
        }
        #expect(answers.dropLast() == Array(repeating: .chunkAck(id: short.id, index: 0, ok: false), count: 8), "\(answers)")
        #expect(answers.last == .cancel(id: short.id, reason: "too many chunks failed verification"))
        try pair.bob.waitFor("transfer") { $0["transfer"] as? String == short.id.description && $0["state"] as? String == "failed" }

        // c. Out-of-range indices, unknown transfer IDs and frames meant for a sender are
        // ignored; the transfer they were aimed at completes normally.
        let offer = file.offer(name: "in-range.bin")
        try rogue.send(.offer(offer))
        #expect(try rogue.next(offer.id) == .accept(id: offer.id, have: [0]))
        let chunk = file.chunks[0]
        try rogue.send(
            .chunk(id: offer.id, index: 3, data: chunk),
            .chunk(id: offer.id, index: 4, data: chunk),
            .chunk(id: offer.id, index: UInt32(Int32.max), data: chunk),
            .chunk(id: offer.id, index: UInt32.max, data: chunk),
            .chunk(id: .random(), index: 0, data: chunk),
            .chunkAck(id: offer.id, index: 0, ok: true),
            .accept(id: offer.id, have: [0xFF]),
            .done(id: offer.id, ok: true, reason: "lies"),
            .decline(id: .random(), reason: "nothing to decline"))
        Thread.sleep(forTimeInterval: 0.5)
        #expect(rogue.pending.filter { $0.transferID != nil }.isEmpty, "answers to ignored frames: \(rogue.pending)")
        #expect(pair.bob.process.isRunning, "bob crashed")
        #expect(!FileManager.default.fileExists(atPath: pair.inbox + "/in-range.bin"), "done from the sender finished the file")

        // Chunk 0 is verified; garbage sent as chunk 0 afterwards is acknowledged as a
        // duplicate but never written over the verified bytes.
        try rogue.send(.chunk(id: offer.id, index: 0, data: chunk))
        #expect(try rogue.next(offer.id) == .chunkAck(id: offer.id, index: 0, ok: true))
        try rogue.send(.chunk(id: offer.id, index: 0, data: [UInt8](repeating: 0xEE, count: chunk.count)))
        #expect(try rogue.next(offer.id) == .chunkAck(id: offer.id, index: 0, ok: true))
        try rogue.send(.chunk(id: offer.id, index: 1, data: file.chunks[1]), .chunk(id: offer.id, index: 2, data: file.chunks[2]))
        #expect(try rogue.next(offer.id) == .chunkAck(id: offer.id, index: 1, ok: true))
        #expect(try rogue.next(offer.id) == .chunkAck(id: offer.id, index: 2, ok: true))
        #expect(try rogue.next(offer.id) == .done(id: offer.id, ok: true, reason: ""))
        #expect(try contents(pair.inbox + "/in-range.bin") == file.content)
        #expect(!FileManager.default.fileExists(atPath: pair.inbox + "/wrong-lengths.bin"))

        // Bob still serves its real paired peer.
        try expectBobStillReceives(pair, tag: "sizes")
        #expect(pair.alice.process.isRunning && pair.bob.process.isRunning)
    }

    // MARK: 7. An unpaired sender

    @Test func anOfferFromAnUnpairedSenderIsNeverActedOn() throws {
        let pair = try TransferPair(bobArguments: [])
        defer { pair.env.cleanup() }
        let rogue = try RogueSender(port: pair.bob.port, name: "rogue-unpaired")
        defer { rogue.close() }
        let invitation = try pair.bob.waitFor("invitation") { $0.peerName == rogue.name }
        #expect(try rogue.take { if case .pairing = $0 { true } else { false } } == .pairing(.pending))

        let file = try ForgedFile(chunkSizes: [1_000, 1_000])
        let offer = file.offer(name: "unsolicited.bin")
        try rogue.send(.offer(offer))
        try pair.bob.waitFor("dropped") { $0.peerName == rogue.name && $0.reason.contains("offer frame") }
        try rogue.send(.chunk(id: offer.id, index: 0, data: file.chunks[0]), .chunk(id: offer.id, index: 1, data: file.chunks[1]))
        try pair.bob.waitFor("dropped") { $0.peerName == rogue.name && $0.reason.contains("chunk frame") }

        // The user accepts the invitation afterwards: the dropped offer is not replayed.
        let id = try #require(invitation["invitation"] as? String)
        let accepted = try pair.env.cli(pair.bob, ["accept", id])
        #expect(accepted.status == 0, "\(accepted.stderr)")
        #expect(try rogue.take { if case .pairing = $0 { true } else { false } } == .pairing(.accepted))
        Thread.sleep(forTimeInterval: 0.5)

        #expect(!pair.bob.events("offer").contains { $0.peerName == rogue.name }, "\(pair.bob.events("offer"))")
        #expect(!pair.bob.events("transfer").contains { $0.peerName == rogue.name })
        #expect(rogue.pending.filter { $0.transferID != nil }.isEmpty, "\(rogue.pending)")
        #expect(listing(pair.inbox).isEmpty, "\(listing(pair.inbox))")
        let listed = try transfersJSON(pair.env, pair.bob)
        #expect(!listed.contains { $0["transfer"] as? String == offer.id.description }, "\(listed)")

        try expectBobStillReceives(pair, tag: "unpaired", autoAccept: false)
    }

    // MARK: 8. Another peer's transfer ID

    /// A paired peer that offers under the ID of someone else's paused transfer must not
    /// slip into it: not without the user's consent, not into the other peer's partial file,
    /// and not recorded as coming from the other peer. The victim then resumes normally.
    @Test func anotherPeersTransferIDCannotBeTakenOver() throws {
        var pair = try TransferPair(bobArguments: [])
        defer { pair.env.cleanup() }
        let victim = try pairedRogueByUser(pair, name: "honest-carol")
        let file = try ForgedFile(chunkSizes: [70_000, 70_000, 70_000])
        let offer = file.offer(name: "carols-report.pdf")
        try victim.send(.offer(offer))
        try pair.bob.waitFor("offer") { $0["transfer"] as? String == offer.id.description }
        // `accept ID` follows the transfer to its end: run it in the background.
        let accepting = try background(pair.env, pair.bob, ["accept", offer.id.description])
        defer { if accepting.isRunning { accepting.terminate(); accepting.waitUntilExit() } }
        #expect(try victim.next(offer.id) == .accept(id: offer.id, have: [0]))
        try victim.send(.chunk(id: offer.id, index: 0, data: file.chunks[0]))
        #expect(try victim.next(offer.id) == .chunkAck(id: offer.id, index: 0, ok: true))
        victim.close()
        try pair.bob.waitFor("transfer") { $0["transfer"] as? String == offer.id.description && $0["state"] as? String == "paused" }

        // Mallory learned the ID and offers her own content under it, while bob still holds
        // carol's paused transfer in memory, and again after bob restarted (when only the
        // index knows it).
        let mallory = try pairedRogueByUser(pair, name: "mallory")
        let payload = try ForgedFile(chunkSizes: [4_000])
        let hijack = payload.offer(name: "payload.sh", id: offer.id)
        try expectNotTakenOver(hijack, by: mallory, payload: payload, pair: pair, when: "bob running")
        mallory.close()

        pair.bob.stop()
        pair.bob = try pair.restartBob(arguments: [])
        try pair.bob.waitForState("connected", peer: "alice")
        let malloryAgain = try RogueSender(port: pair.bob.port, name: "mallory", keyPair: mallory.keyPair)
        defer { malloryAgain.close() }
        #expect(try malloryAgain.take { if case .pairing = $0 { true } else { false } } == .pairing(.accepted))
        try expectNotTakenOver(hijack, by: malloryAgain, payload: payload, pair: pair, when: "after bob restarted")

        let listed = try transfersJSON(pair.env, pair.bob)
        let record = listed.first { $0["transfer"] as? String == offer.id.description }
        #expect(record?.peerName == "honest-carol", "\(String(describing: record))")
        #expect(record?["name"] as? String == "carols-report.pdf", "\(String(describing: record))")

        // Carol comes back and resumes where she stopped.
        let carol = try RogueSender(port: pair.bob.port, name: "honest-carol", keyPair: victim.keyPair)
        defer { carol.close() }
        #expect(try carol.take { if case .pairing = $0 { true } else { false } } == .pairing(.accepted))
        try carol.send(.offer(offer))
        let resumed = try carol.next(offer.id)
        #expect(resumed == .accept(id: offer.id, have: [0b001]), "carol's transfer did not resume: \(resumed)")
        if resumed == .accept(id: offer.id, have: [0b001]) {
            try carol.send(.chunk(id: offer.id, index: 1, data: file.chunks[1]), .chunk(id: offer.id, index: 2, data: file.chunks[2]))
            _ = try carol.next(offer.id)
            _ = try carol.next(offer.id)
            #expect(try carol.next(offer.id) == .done(id: offer.id, ok: true, reason: ""))
            #expect(try contents(pair.inbox + "/carols-report.pdf") == file.content)
        }
        try expectBobStillReceives(pair, tag: "hijack", autoAccept: false)
    }

    /// Bob (no --auto-accept) must not accept `hijack` on its own: it declines it, ignores
    /// it, or asks its user (an offer event naming the rogue); and no file of it appears.
    func expectNotTakenOver(_ hijack: TransferOffer, by rogue: RogueSender, payload: ForgedFile, pair: TransferPair,
                            when: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let eventsBefore = pair.bob.events.count
        try rogue.send(.offer(hijack))
        let answer = try? rogue.next(hijack.id, within: 2)
        if case .accept = answer {
            Issue.record("\(when): bob accepted \(rogue.name)'s offer under another peer's transfer ID without asking its user",
                         sourceLocation: sourceLocation)
            try rogue.send(.chunk(id: hijack.id, index: 0, data: payload.chunks[0]))
            _ = try? rogue.next(hijack.id, within: 2)
            _ = try? rogue.next(hijack.id, within: 2)
        }
        Thread.sleep(forTimeInterval: 0.3)
        let transferEvents = pair.bob.events.dropFirst(eventsBefore).filter {
            $0["event"] as? String == "transfer" && $0.peerName == rogue.name && $0["state"] as? String != "declined"
        }
        #expect(transferEvents.isEmpty, "\(when): \(transferEvents)", sourceLocation: sourceLocation)
        #expect(!FileManager.default.fileExists(atPath: pair.inbox + "/payload.sh"), "\(when): the rogue's file was put in place",
                sourceLocation: sourceLocation)
    }

    // MARK: 9. A streamed manifest

    /// Over real Noise, a paired peer's offer without a manifest (`streamed-manifest`): chunks
    /// that name their hash, in order, make the file; a chunk that does not follow (a gap)
    /// stops the transfer, and nothing of it stays.
    @Test func aStreamedManifestIsTakenOnlyAsItsChunksFollow() throws {
        let pair = try TransferPair()
        defer { pair.env.cleanup() }
        let rogue = try pairedRogue(pair, name: "rogue-streams")
        defer { rogue.close() }
        let file = try ForgedFile(chunkSizes: [70_000, 70_000, 70_000])
        func hashed(_ id: TransferID, _ index: Int) -> Frame {
            .hashedChunk(id: id, index: UInt32(index), hash: ChunkHash.of(file.chunks[index]).bytes, data: file.chunks[index])
        }

        let honest = TransferOffer(id: .random(), kind: .file, name: "streamed.bin", entries: [file.entry(path: "streamed.bin", manifest: [])])
        try rogue.send(.offer(honest))
        // The accept's bitmap covers the chunks the offer listed: none.
        #expect(try rogue.next(honest.id) == .accept(id: honest.id, have: []))
        try rogue.send((0..<3).map { hashed(honest.id, $0) })
        for index in 0..<3 {
            #expect(try rogue.next(honest.id) == .chunkAck(id: honest.id, index: UInt32(index), ok: true))
        }
        #expect(try rogue.next(honest.id) == .done(id: honest.id, ok: true, reason: ""))
        #expect(try contents(pair.inbox + "/streamed.bin") == file.content)

        let lying = TransferOffer(id: .random(), kind: .file, name: "gap.bin", entries: [file.entry(path: "gap.bin", manifest: [])])
        try rogue.send(.offer(lying))
        #expect(try rogue.next(lying.id) == .accept(id: lying.id, have: []))
        try rogue.send(hashed(lying.id, 0))
        #expect(try rogue.next(lying.id) == .chunkAck(id: lying.id, index: 0, ok: true))
        try rogue.send(hashed(lying.id, 2))
        let answer = try rogue.next(lying.id)
        guard case let .cancel(_, reason) = answer else {
            Issue.record("a chunk after a gap was not refused: \(answer)")
            return
        }
        #expect(reason.contains("do not fit the offer"), "\(reason)")
        let failed = try pair.bob.waitFor("transfer") { $0["transfer"] as? String == lying.id.description && $0["state"] as? String == "failed" }
        #expect(failed.reason.contains("do not fit its offer"), "\(failed)")
        let names = try treeNames(pair.inbox)
        #expect(!names.contains { ($0 as NSString).lastPathComponent.hasPrefix("gap") }, "\(names)")
        #expect(names.allSatisfy { $0 == ".syncpeer-partial" || $0 == "streamed.bin" }, "partial data left behind: \(names)")
        try expectBobStillReceives(pair, tag: "streams")
    }

    // MARK: - Helpers

    /// A rogue connected to bob (started with --auto-accept) and paired by it.
    func pairedRogue(_ pair: TransferPair, name: String) throws -> RogueSender {
        let rogue = try RogueSender(port: pair.bob.port, name: name)
        try rogue.expectPairedByAutoAccept()
        try pair.bob.waitForState("connected", peer: name)
        return rogue
    }

    /// A rogue connected to bob (without --auto-accept) whose invitation bob's user accepts.
    func pairedRogueByUser(_ pair: TransferPair, name: String) throws -> RogueSender {
        let rogue = try RogueSender(port: pair.bob.port, name: name)
        let invitation = try pair.bob.waitFor("invitation") { $0.peerName == name }
        let id = try #require(invitation["invitation"] as? String)
        let accepted = try pair.env.cli(pair.bob, ["accept", id])
        try #require(accepted.status == 0, "\(accepted.stderr)")
        #expect(try rogue.take { if case .pairing = $0 { true } else { false } } == .pairing(.pending))
        #expect(try rogue.take { if case .pairing = $0 { true } else { false } } == .pairing(.accepted))
        try pair.bob.waitForState("connected", peer: name)
        return rogue
    }

    /// The rogue offers `files` honestly (accepted at once) and sends every chunk; returns
    /// when bob reports the transfer done.
    func deliver(_ files: [ForgedFile], as offer: TransferOffer, by rogue: RogueSender,
                 sourceLocation: SourceLocation = #_sourceLocation) throws {
        try rogue.send(.offer(offer))
        let chunkCount = files.reduce(0) { $0 + $1.chunks.count }
        let accept = try rogue.next(offer.id)
        #expect(accept == .accept(id: offer.id, have: [UInt8](repeating: 0, count: (chunkCount + 7) / 8)),
                "\(accept)", sourceLocation: sourceLocation)
        var index: UInt32 = 0
        for file in files {
            for chunk in file.chunks {
                try rogue.send(.chunk(id: offer.id, index: index, data: chunk))
                index += 1
            }
        }
        for _ in 0..<chunkCount {
            let ack = try rogue.next(offer.id)
            guard case .chunkAck(_, _, true) = ack else {
                Issue.record("expected an ok ack, got \(ack)", sourceLocation: sourceLocation)
                return
            }
        }
        #expect(try rogue.next(offer.id) == .done(id: offer.id, ok: true, reason: ""), sourceLocation: sourceLocation)
    }

    func deliver(_ file: ForgedFile, as offer: TransferOffer, by rogue: RogueSender,
                 sourceLocation: SourceLocation = #_sourceLocation) throws {
        try deliver([file], as: offer, by: rogue, sourceLocation: sourceLocation)
    }

    /// Alice (the real paired peer) sends a small file; it must arrive in bob's INBOX.
    func expectBobStillReceives(_ pair: TransferPair, tag: String, autoAccept: Bool = true,
                                sourceLocation: SourceLocation = #_sourceLocation) throws {
        let name = "healthy-\(tag).txt"
        let source = pair.outbox + "/" + name
        try "bob is still well (\(tag))\n".write(toFile: source, atomically: true, encoding: .utf8)
        if autoAccept {
            let result = try pair.send(source)
            #expect(result.status == 0, "alice could not send after the attack: \(result.stderr)", sourceLocation: sourceLocation)
        } else {
            let sending = Process()
            sending.executableURL = URL(fileURLWithPath: SyncpeerRunner.binary)
            sending.arguments = ["--home", pair.alice.home, "send", source, "--to", "bob"]
            sending.environment = ["PATH": "/usr/bin:/bin", "SYNCPEER_INTERFACE": "lo"]
            sending.standardOutput = FileHandle.nullDevice
            sending.standardError = FileHandle.nullDevice
            try sending.run()
            let offer = try pair.bob.waitFor("offer") { $0.peerName == "alice" && $0["name"] as? String == name }
            let id = try #require(offer["transfer"] as? String)
            let accepted = try pair.env.cli(pair.bob, ["accept", id])
            #expect(accepted.status == 0, "\(accepted.stderr)", sourceLocation: sourceLocation)
            sending.waitUntilExit()
            #expect(sending.terminationStatus == 0, sourceLocation: sourceLocation)
        }
        #expect(try String(contentsOfFile: pair.inbox + "/" + name, encoding: .utf8) == "bob is still well (\(tag))\n",
                sourceLocation: sourceLocation)
        #expect(pair.bob.process.isRunning, sourceLocation: sourceLocation)
    }

    /// `syncpeer ARGS` against `daemon`'s home, running in the background.
    func background(_ env: SyncpeerRunner, _ daemon: DaemonProcess, _ arguments: [String]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: SyncpeerRunner.binary)
        process.arguments = ["--home", daemon.home] + arguments
        process.environment = ["PATH": "/usr/bin:/bin", "HOME": env.root.path, "SYNCPEER_INTERFACE": "lo"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Names in a directory, sorted (not recursive).
    func listing(_ path: String) -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return ["<cannot list \(path)>"] }
        return names.sorted()
    }

    /// Every path below `root` (relative), without following symbolic links.
    func treeNames(_ root: String) throws -> [String] {
        var out: [String] = []
        var stack = [""]
        while let relative = stack.popLast() {
            let directory = relative.isEmpty ? root : root + "/" + relative
            for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
                let child = relative.isEmpty ? name : relative + "/" + name
                out.append(child)
                if kind(root + "/" + child) == S_IFDIR { stack.append(child) }
            }
        }
        return out.sorted()
    }

    /// The file type bits of `path` (lstat: a link is a link).
    func kind(_ path: String) -> mode_t? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return st.st_mode & S_IFMT
    }

    func contents(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    func transfersJSON(_ env: SyncpeerRunner, _ daemon: DaemonProcess) throws -> [[String: Any]] {
        let result = try env.cli(daemon, ["transfers", "--json"])
        try #require(result.status == 0, "transfers: \(result.stderr)")
        return try result.stdout.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }
}
