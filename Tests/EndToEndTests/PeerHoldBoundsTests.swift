import Foundation
import Glibc
import PeerCrypto
import PeerFiles
@testable import PeerNet
import PeerWire
import Testing

/// What a hostile paired peer can make a real daemon hold: offers of files and share offers
/// waiting for the user's answer, and index entries past its quota. A rogue with a real
/// Noise session floods bob (no auto-accept) above each bound; bob must refuse the excess at
/// once with a reason, and its memory must stay within the bound whatever the flood.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct PeerHoldBoundsTests {
    /// Offers from `peer` that bob's `transfers` lists as waiting for an answer.
    static func pendingOffers(_ bob: HostileBob, from peer: String) throws -> [[String: Any]] {
        let result = try bob.env.cli(bob.daemon, ["transfers", "--json"])
        try #require(result.status == 0, "transfers: \(result.stderr)")
        return result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0.peerName == peer && $0["state"] as? String == "offered" }
    }

    /// The decline reasons the rogue received for `ids` (waiting up to `seconds` for all).
    static func declines(_ rogue: RogueSender, _ ids: [TransferID], within seconds: Double) -> [String] {
        let deadline = Date().addingTimeInterval(seconds)
        return ids.compactMap { id in
            guard case let .decline(_, reason)? = try? rogue.take(within: max(0.05, deadline.timeIntervalSinceNow), where: {
                if case let .decline(declined, _) = $0 { declined == id } else { false }
            }) else { return nil }
            return reason
        }
    }

    /// A single-file offer whose manifest lists `chunks` chunks of 1 byte (a made-up file:
    /// the manifest is consistent, and nothing is ever sent).
    static func offer(chunks: Int, name: String) throws -> TransferOffer {
        let refs = (0..<chunks).map { ChunkRef(offset: UInt64($0), size: 1, hash: ChunkHash(bytes: [UInt8](repeating: UInt8($0 & 0xFF), count: 32))!) }
        let manifest = try Manifest(fileSize: UInt64(chunks), chunks: refs)
        return TransferOffer(id: .random(), kind: .file, name: name,
                             entries: [.init(path: name, size: UInt64(chunks), mode: 0o644, mtimeNanoseconds: 0, manifest: manifest.encode())])
    }

    @Test func offersPastTheCountBoundAreDeclinedAtOnceAndAnAnswerMakesRoom() throws {
        let bob = try HostileBob(autoAccept: false)
        defer { bob.env.cleanup() }
        let rogue = try bob.pairedRogueByUser(name: "offer-flood")
        defer { rogue.close() }

        // 24 small offers: 16 wait for the user, the 8 beyond are declined at once.
        let offers = try (0..<24).map { try Self.offer(chunks: 1, name: "f\($0).txt") }
        try rogue.send(offers.map { .offer($0) })
        let reasons = Self.declines(rogue, Array(offers.suffix(8).map(\.id)), within: 10)
        #expect(reasons.count == 8, "declined: \(reasons)")
        #expect(reasons.allSatisfy { $0.contains("16 offers from you are already waiting for an answer") }, "\(reasons)")
        #expect(try Self.pendingOffers(bob, from: "offer-flood").count == 16)
        let error = try bob.daemon.waitFor("error") { $0.peerName == "offer-flood" }
        #expect(error.reason.contains("refused an offer from offer-flood"), "\(error)")

        // Declining one makes room for one more, and only one.
        let declined = try bob.env.cli(bob.daemon, ["decline", offers[0].id.description])
        #expect(declined.status == 0, "decline: \(declined.stderr)")
        let again = try (0..<2).map { try Self.offer(chunks: 1, name: "again\($0).txt") }
        try rogue.send(again.map { .offer($0) })
        #expect(Self.declines(rogue, [again[1].id], within: 10).count == 1)
        #expect(Self.declines(rogue, [again[0].id], within: 1).isEmpty, "the freed slot was not used")
        #expect(try Self.pendingOffers(bob, from: "offer-flood").count == 16)
    }

    @Test func offersOfLargeManifestsAreBoundedInMemory() throws {
        let bob = try HostileBob(autoAccept: false, environment: ResourceBoundsTests.patientEnvironment)
        defer { bob.env.cleanup() }
        let rogue = try bob.pairedRogueByUser(name: "manifest-flood")
        defer { rogue.close() }
        let before = try ProcessFigures(pid: bob.daemon.pid)

        // 12 offers of 340,000-chunk manifests (12 MiB each, 16 MiB decoded): 12 × 28 MiB
        // held without the bound, at most 64 MiB of them with it (4).
        let template = try Self.offer(chunks: 340_000, name: "big.bin")
        let offers = (0..<12).map { _ in TransferOffer(id: .random(), kind: .file, name: "big.bin", entries: template.entries) }
        for offer in offers { try rogue.send(.offer(offer)) }
        let reasons = Self.declines(rogue, Array(offers.suffix(8).map(\.id)), within: 30)
        let during = try ProcessFigures(pid: bob.daemon.pid)
        #expect(reasons.count == 8, "declined: \(reasons.count)")
        #expect(reasons.allSatisfy { $0.contains("would hold") && $0.contains("at most 64 MiB") }, "\(reasons.first ?? "")")
        #expect(try Self.pendingOffers(bob, from: "manifest-flood").count == 4)

        // Leaving withdraws them: nothing of theirs stays listed.
        rogue.close()
        try bob.daemon.waitForState("notConnected", peer: "manifest-flood")
        #expect(try Self.pendingOffers(bob, from: "manifest-flood").isEmpty)
        let after = try ProcessFigures(pid: bob.daemon.pid)
        ProcessFigures.report("12 offers of 12 MiB manifests from one peer", before, after, during: during)
        #expect(during.peakMiB - before.rssMiB < 160, "memory grew with the offers: \(during)")
    }

    @Test func offersOfManyFilesAreBoundedInMemory() throws {
        let bob = try HostileBob(autoAccept: false, environment: ResourceBoundsTests.patientEnvironment)
        defer { bob.env.cleanup() }
        let rogue = try bob.pairedRogueByUser(name: "entry-flood")
        defer { rogue.close() }
        let before = try ProcessFigures(pid: bob.daemon.pid)

        // 6 folder offers of 100,000 one-byte files: the first waits, the rest are declined.
        let file = try ForgedFile(chunkSizes: [1])
        let entries = (0..<100_000).map { file.entry(path: "d\($0 % 100)/f\($0)") }
        let offers = (0..<6).map { _ in TransferOffer(id: .random(), kind: .folder, name: "many", entries: entries) }
        for offer in offers { try rogue.send(.offer(offer)) }
        let reasons = Self.declines(rogue, Array(offers.dropFirst().map(\.id)), within: 30)
        let during = try ProcessFigures(pid: bob.daemon.pid)
        ProcessFigures.report("6 offers of 100,000 files from one peer", before, during)
        #expect(reasons.count == 5 && reasons.allSatisfy { $0.contains("would hold") }, "\(reasons)")
        #expect(try Self.pendingOffers(bob, from: "entry-flood").count == 1)
        #expect(during.peakMiB - before.rssMiB < 200, "memory grew with the offers: \(during)")
    }

    @Test func shareOffersPastTheBoundAreRefusedAndNotStored() throws {
        let bob = try HostileBob(autoAccept: false)
        defer { bob.env.cleanup() }
        let rogue = try bob.pairedRogueByUser(name: "share-flood")
        defer { rogue.close() }

        // 200 folders offered: 32 wait for the user, the others are refused at once.
        let folders = (0..<200).map { "flood-folder-\($0)" }
        try rogue.send(folders.map { .shareOffer(folder: $0, label: $0) })
        var refused: [String: String] = [:]
        while refused.count < 168, case let .shareAnswer(folder, false, reason)? = try? rogue.take(within: 10, where: {
            if case .shareAnswer(_, false, _) = $0 { true } else { false }
        }) { refused[folder] = reason }
        #expect(refused.count == 168, "refused \(refused.count)")
        #expect(Set(refused.keys) == Set(folders.suffix(168)))
        #expect(refused.values.allSatisfy { $0.contains("32 folders you shared are already waiting") }, "\(refused.values.first ?? "")")
        let status = try bob.status()
        let offers = (status["offers"] as? [[String: Any]] ?? []).filter { $0.peerName == "share-flood" }
        #expect(offers.count == 32)
        let error = try bob.daemon.waitFor("error") { $0.peerName == "share-flood" }
        #expect(error.reason.contains("refused a share offer from share-flood"), "\(error)")
        // One offered again is a refresh, not a new one: still answered by no refusal.
        try rogue.send(.shareOffer(folder: folders[0], label: "again"))
        #expect((try? rogue.take(within: 1) { if case .shareAnswer = $0 { true } else { false } }) == nil)
    }

    @Test func indexPagesPastTheQuotaAreRefusedBeforeTheirEntriesAreExamined() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        // (Patient timers: the rogue reads only when the test asks, not while it builds pages.)
        let (bob, rogue, folderID) = try RogueMember.joinedFolder(
            env, environment: ResourceBoundsTests.patientEnvironment.merging(["SYNCPEER_PEER_INDEX_ALLOWANCE": "2000"]) { $1 })
        defer { rogue.close() }
        let before = try ProcessFigures(pid: bob.pid)

        // 2,000 tombstones fill the quota (2 × 1 + 2,000); then 20 pages of 10,000 entries
        // that bob must refuse whole. Each of those pages holds an entry with an unsafe
        // path: examined, it would be reported ("ignored an index entry"); refused first,
        // it is not even looked at.
        try rogue.channel.send(.indexUpdate(folder: folderID, full: true, entries: (1...2_000).map { rogue.tombstone("gone-\($0)", UInt64($0)) }))
        _ = try rogue.next(within: 10) { if case .indexAck(_, 2_000) = $0 { true } else { false } }
        let pages: [Frame] = (0..<20).map { page in
            let first = 2_001 + page * 10_000
            let entries = [rogue.tombstone("../unsafe-\(page)", UInt64(first))] + (first + 1 ..< first + 10_000).map { rogue.tombstone("gone-\($0)", UInt64($0)) }
            return .indexUpdate(folder: folderID, full: false, entries: entries)
        }
        let channel = rogue.channel
        let flood = Thread {
            for page in pages {
                guard (try? channel.send(page)) != nil else { return }
            }
        }
        flood.start()
        let refusal = try bob.waitFor("error", timeout: 20) { $0.peerName == "mallory" && $0.reason.contains("index entries") }
        // Until every page is read (and no ack comes for any of them).
        #expect(throws: (any Error).self) { try rogue.next(within: 5) { if case .indexAck = $0 { true } else { false } } }
        let after = try ProcessFigures(pid: bob.pid)
        ProcessFigures.report("20 pages of 10,000 tombstones past the quota", before, after)
        #expect(refusal.reason.contains("mallory"), "\(refusal)")
        let examined = bob.events("error").filter { $0.reason.contains("ignored an index entry") }
        #expect(examined.isEmpty, "entries of refused pages were examined: \(examined.count) reported")
        #expect(after.peakMiB - before.rssMiB < 64)
    }
}
