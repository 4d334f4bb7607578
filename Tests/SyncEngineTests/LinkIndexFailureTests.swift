import Foundation
import PeerCrypto
@testable import PeerIndex
@testable import SyncEngine
import Synchronization
import Testing

/// Issue 42.2 for connections and transfers: a read of the peers or transfer records that
/// fails is the user's to know (the command's error, or an error event), never an empty
/// answer acted on: `peers` listing nobody, a paired peer silently not reconnected, an
/// offer from an auto-accepted peer waiting without a word, resumable data thrown away.
@Suite(.serialized) struct LinkIndexFailureTests {
    /// `peers` when the paired peers cannot be read answers with the index's error (it
    /// listed nobody); a paired peer that goes away is not reconnected to on a guess, and
    /// the user is told why.
    @Test func peersWhenThePairedPeersCannotBeReadSaysWhyNotNobody() throws {
        let bob = try ConnectionServiceTests.Peer("bob") { $0.autoAccept = true }
        let alice = try ConnectionServiceTests.Peer("alice")
        defer { alice.service.stop(); bob.service.stop() }
        let paired = alice.invite(bob)
        try TransferPair.eventually("alice's invitation answered") { paired.value != nil }
        try TransferPair.eventually("alice lists bob") { (try? alice.service.peerList().map(\.peer.name)) == ["bob"] }

        try IndexFailureTests.damage(alice.index, table: "peer_certificates")
        IndexFailureTests.expectIndexError({ () throws(EngineError) in _ = try alice.service.peerList() }, table: "peer_certificates")
        try IndexFailureTests.damage(alice.index, table: "peers")
        IndexFailureTests.expectIndexError({ () throws(EngineError) in _ = try alice.service.peerList() }, table: "peers")

        bob.service.stop()
        try TransferPair.eventually("alice reports why she does not reconnect") {
            alice.recorded.errors.contains { $0.contains("cannot read whether bob is paired to reconnect to it") }
        }
        #expect(alice.recorded.errors.contains { $0.contains("no such table: peers") }, "\(alice.recorded.errors)")
    }

    /// A paired peer whose session ends while our peers cannot be read: the user was told,
    /// and it was never redialled (only discovery, its own dial or a restart brought it back).
    /// Now the pairing is read again with the redials' back-off and, once it reads, the peer
    /// is redialled. Alice does not listen: bob cannot dial her, only her redial brings him back.
    @Test func aPeerWhosePairingCouldNotBeReadIsRedialledOnceItReads() throws {
        let bob = try ConnectionServiceTests.Peer("bob") { $0.autoAccept = true }
        let alice = try ConnectionServiceTests.Peer("alice", listening: false)
        defer { alice.service.stop() }
        let paired = alice.invite(bob)
        try TransferPair.eventually("paired") { paired.value != nil && alice.observer.stillConnected.count == 1 }
        try IndexFailureTests.damage(alice.index, table: "peers")
        bob.service.stop()
        let said = { alice.recorded.errors.filter { $0.contains("cannot read whether bob is paired to reconnect to it") } }
        try TransferPair.eventually("alice says why she does not reconnect yet") { !said().isEmpty }
        let bob2 = try ConnectionServiceTests.Peer(restarting: bob)
        defer { bob2.service.stop() }
        Thread.sleep(forTimeInterval: 0.3)  // several reads again (50 ms, doubling): nobody dialled on a guess
        #expect(bob2.observer.connected.isEmpty)
        try alice.index.write { db in try db.execute("ALTER TABLE peers_damaged RENAME TO peers") }
        try TransferPair.eventually("alice redials bob by herself") {
            alice.observer.stillConnected.count == 1 && bob2.observer.stillConnected.count == 1
        }
        #expect(said().count == 1, "\(said())")
    }

    /// Bob, paired with alice, restarts (listening, or not: then alice cannot dial him, as
    /// behind NAT) while alice's peers cannot be read; he dials her at once and is refused.
    /// Both are the caller's to stop.
    private func bobRestartsWhileAlicesPeersCannotBeRead(listening: Bool) throws
        -> (alice: ConnectionServiceTests.Peer, bob: ConnectionServiceTests.Peer) {
        let alice = try ConnectionServiceTests.Peer("alice") { $0.autoAccept = true }
        let bob = try ConnectionServiceTests.Peer("bob")
        let paired = bob.invite(alice)
        try TransferPair.eventually("paired") { paired.value != nil && alice.observer.stillConnected.count == 1 }
        try IndexFailureTests.damage(alice.index, table: "peers")
        bob.service.stop()
        return (alice, try ConnectionServiceTests.Peer(restarting: bob, listening: listening))
    }

    /// How many times `alice` refused a peer because her peers cannot be read.
    private func refusals(_ alice: ConnectionServiceTests.Peer) -> Int {
        alice.events.filter { if case let .refused(refused) = $0 { refused.reason.contains("cannot be read") } else { false } }.count
    }

    /// A paired peer that dials us while our peers cannot be read is refused, and nobody
    /// reconnected (its redial ended with the refusal). Now the refusing side reads the
    /// pairing again and redials once it reads.
    @Test func aPeerRefusedWhileThePeersCannotBeReadIsRedialledOnceTheyRead() throws {
        let (alice, bob2) = try bobRestartsWhileAlicesPeersCannotBeRead(listening: true)
        defer { alice.service.stop(); bob2.service.stop() }
        try TransferPair.eventually("alice refuses bob") { refusals(alice) >= 1 }
        try alice.index.write { db in try db.execute("ALTER TABLE peers_damaged RENAME TO peers") }
        try TransferPair.eventually("alice redials bob by herself") {
            alice.observer.stillConnected.count == 1 && bob2.observer.stillConnected.count == 1
        }
    }

    /// A paired peer refused while our peers cannot be read is told to try again later
    /// (`tryLater`) and does, with back-off: it reconnects by itself once they read, also when
    /// we cannot dial it. The refusal said `normal`: bob's redial ended with it, and only
    /// alice's dial could bring him back.
    @Test func aPeerRefusedWhileThePeersCannotBeReadDialsAgainUntilTheyRead() throws {
        let (alice, bob2) = try bobRestartsWhileAlicesPeersCannotBeRead(listening: false)
        defer { alice.service.stop(); bob2.service.stop() }
        // Each refusal doubles his wait (from `redialInitial`, 50 ms here).
        let wait = { bob2.onQueue { bob2.service.state.withLock { $0.laterDelays[alice.key] } } }
        try TransferPair.eventually("bob dials alice again after each refusal, waiting longer each time") {
            refusals(alice) >= 3 && wait().map { $0 >= .milliseconds(200) } == true
        }
        try alice.index.write { db in try db.execute("ALTER TABLE peers_damaged RENAME TO peers") }
        try TransferPair.eventually("bob reconnects by himself") {
            alice.observer.stillConnected.count == 1 && bob2.observer.stillConnected.count == 1
        }
        #expect(bob2.onQueue { bob2.service.state.withLock { $0.laterDelays.isEmpty } }, "connected: the back-off starts over")
    }

    /// Any key can end a session while the peers cannot be read (it is refused): the
    /// devices whose pairing is read again are bounded, and the ones past the bound are said.
    @Test func thePairingsReadAgainAreBounded() throws {
        let alice = try ConnectionServiceTests.Peer("alice")
        defer { alice.service.stop() }
        try IndexFailureTests.damage(alice.index, table: "peers")
        let strangers = (0..<(ConnectionService.maxPairingRechecks + 6)).map { n in
            PeerRef(id: DeviceID(publicKey: KeyPair.generate().publicKey), name: "stranger \(n)")
        }
        alice.onQueue {
            for stranger in strangers + strangers { alice.service.planRedial(stranger, device: stranger.id.compact) }
        }
        #expect(alice.service.state.withLock { $0.pairingRechecks.count } == ConnectionService.maxPairingRechecks)
        let said = alice.recorded.errors.filter { $0.contains("cannot read whether stranger") }
        // Those read again are said once; those past the bound each time (as each refusal is).
        #expect(said.filter { $0.contains("reading it again") }.count == ConnectionService.maxPairingRechecks)
        #expect(said.filter { $0.contains("peers wait for that already") }.count == 12)
    }

    /// A node restarting with paired peers it cannot read says so, rather than starting as
    /// if it had nobody to reconnect to.
    @Test func restartingWithPairedPeersTheIndexCannotReadIsReported() throws {
        let bob = try ConnectionServiceTests.Peer("bob") { $0.autoAccept = true }
        let alice = try ConnectionServiceTests.Peer("alice")
        defer { bob.service.stop() }
        let paired = alice.invite(bob)
        try TransferPair.eventually("paired") { paired.value != nil }
        alice.service.stop()
        try IndexFailureTests.damage(alice.index, table: "peers")
        let restarted = try ConnectionServiceTests.Peer(restarting: alice)
        defer { restarted.service.stop() }
        try TransferPair.eventually("the restarted alice reports it") {
            restarted.recorded.errors.contains { $0.contains("cannot read the paired peers to reconnect to them") }
        }
        #expect(restarted.recorded.errors.contains { $0.contains("no such table: peers") }, "\(restarted.recorded.errors)")
    }

    /// A peer that unpairs us when our pairings cannot be read: the session ends with that
    /// reason, and the user is told that the pairing here could not be looked at (it used
    /// to end without a word, leaving a pairing that can never connect).
    @Test func beingUnpairedWhenThePairingsCannotBeReadIsReported() throws {
        let bob = try ConnectionServiceTests.Peer("bob") { $0.autoAccept = true }
        let alice = try ConnectionServiceTests.Peer("alice")
        defer { alice.service.stop(); bob.service.stop() }
        let paired = alice.invite(bob)
        try TransferPair.eventually("paired") { paired.value != nil && bob.observer.connected.count == 1 }
        try IndexFailureTests.damage(alice.index, table: "peers")
        _ = try bob.service.unpair(peer: "alice")
        try TransferPair.eventually("alice reports it") {
            alice.recorded.errors.contains { $0.contains("bob unpaired this device, but whether it is paired here cannot be read") }
        }
        #expect(alice.recorded.errors.contains { $0.contains("no such table: peers") }, "\(alice.recorded.errors)")
        try TransferPair.eventually("alice's session ends for that reason") {
            alice.observer.ended.last?.contains("unpaired this device") == true
        }
    }

    /// A node paired by a certificate ID that is not its own has its pairing undone; when
    /// the index refuses the removal, that is reported and tried again until it is gone
    /// (it used to be dropped, leaving the impostor paired).
    @Test func anUndoneCertificatePairingThatCannotBeRemovedIsReportedAndRetried() throws {
        let bob = try ConnectionServiceTests.Peer("bob") { $0.autoAccept = true }
        let alice = try ConnectionServiceTests.Peer("alice")
        defer { alice.service.stop(); bob.service.stop() }
        alice.onQueue { alice.service.undoRetry = .milliseconds(100) }
        try alice.index.write { db in
            try db.execute("CREATE TRIGGER refuse BEFORE DELETE ON peers BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END")
        }
        let other = try TLSIdentity(keyPair: .generate()).id
        alice.onQueue {
            alice.service.startDial(address: bob.address, expected: nil, context: nil, progress: nil, completion: nil,
                                    expectedCertificate: other)
        }
        try TransferPair.eventually("alice reports the pairing she cannot undo") {
            alice.recorded.errors.contains { $0.contains("bob is not the node its certificate ID was paired by, but its pairing cannot be removed") }
        }
        #expect(alice.recorded.errors.contains { $0.contains("disk I/O error") && $0.contains("trying again") }, "\(alice.recorded.errors)")
        #expect(try alice.index.peer(deviceID: bob.key) != nil)
        try alice.index.write { db in try db.execute("DROP TRIGGER refuse") }
        try TransferPair.eventually("a retry removes it") { (try? alice.index.peers().isEmpty) == true }
    }

    /// An offer arriving when the peer's auto-accept setting cannot be read waits for an
    /// answer (not accepted on a guess) and the user is told why it waits.
    @Test func anOfferWhoseAutoAcceptCannotBeReadWaitsAndSaysWhy() throws {
        let bobStore = try FailingStore()
        let pair = try TransferPair(configureBob: { $0.autoAccept = false }, bobStore: bobStore)
        defer { pair.cleanup() }
        pair.connect()
        bobStore.failing.withLock { _ = $0.insert("peer") }
        let source = pair.alice.directory + "/photo.bin"
        try TransferPair.randomFile(source, size: 20_000, seed: 3)
        _ = pair.send(source)
        try TransferPair.eventually("bob is asked") { !pair.bob.events.offers.isEmpty }
        let report = try #require(pair.bob.events.errors.first { $0.contains("cannot read whether offers from alice are accepted") },
                                  "\(pair.bob.events.errors)")
        #expect(report.contains("database or disk is full"), "\(report)")
        #expect(!FileManager.default.fileExists(atPath: pair.bob.directory + "/photo.bin"))
    }

    /// After a restart, an unfinished send whose own record cannot be read when it is about
    /// to be offered again (it may have been cancelled meanwhile) is not offered on a
    /// guess: the user is told why.
    @Test func anUnfinishedSendWhoseRecordCannotBeReadIsNotOfferedAgain() throws {
        let aliceStore = try FailingStore()
        let pair = try TransferPair(aliceStore: aliceStore)
        defer { pair.cleanup() }
        let source = pair.alice.directory + "/stopped.bin"
        try TransferPair.randomFile(source, size: 30_000, seed: 4)
        _ = try StreamedManifestTests.recordInterruptedStream(pair, source: source)
        aliceStore.failing.withLock { _ = $0.insert("transfer") }
        pair.connect()
        try TransferPair.eventually("alice reports the record she cannot read") {
            pair.alice.events.errors.contains { $0.contains("cannot read the transfer record of stopped.bin") }
        }
        #expect(pair.alice.events.errors.contains { $0.contains("to offer it to bob again") }, "\(pair.alice.events.errors)")
        #expect(pair.bob.events.offers.isEmpty)
    }

    /// A file sent again after it changed reuses the chunks of the interrupted receive; when
    /// the index cannot say which chunks that partial file holds, the file is received anew,
    /// the earlier partial data is kept (not removed without a word) and the user told why.
    @Test func anEarlierPartialWhoseChunksCannotBeReadIsKeptAndReported() throws {
        let bobStore = try FailingStore()
        let pair = try TransferPair(bobStore: bobStore)
        defer { pair.cleanup() }
        let id = "00112233445566778899aabbccddeeff"
        let partial = try IndexFailureTests.recordedReceive(pair, id: id)
        bobStore.failing.withLock { _ = $0.insert("chunks") }
        pair.connect()
        let source = pair.alice.directory + "/big.bin"
        try TransferPair.randomFile(source, size: 40_000, seed: 5)
        let outcome = pair.send(source)
        try TransferPair.eventually("the send ends") { outcome.value != nil }
        guard case .success? = outcome.value else { Issue.record("the send failed: \(String(describing: outcome.value))"); return }
        #expect(FileManager.default.contentsEqual(atPath: source, andPath: pair.bob.directory + "/big.bin"))
        let report = try #require(pair.bob.events.errors.first { $0.contains("cannot read which chunks the earlier partial data of big.bin") },
                                  "\(pair.bob.events.errors)")
        #expect(report.contains("database or disk is full"), "\(report)")
        #expect(FileManager.default.fileExists(atPath: partial))
        #expect(try pair.bob.index.transfer(id: id)?.state == .paused)
    }
}
