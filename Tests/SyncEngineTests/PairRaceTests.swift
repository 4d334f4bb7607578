import PeerCrypto
@testable import SyncEngine
import Testing

/// The bookkeeping of `pair CERTIFICATE-ID`'s dials (pure logic; the dials themselves are
/// in GlobalPairingTests): at most 8 at once, each address once, one winner, and the relays
/// only once every address failed.
@Suite struct PairRaceTests {
    @Test func atMostEightDialsAtOnceOneWinnerAndTheRelaysOnlyAfterEveryFailure() throws {
        let certificate = try TLSIdentity(keyPair: .generate()).id
        let addresses = (1...12).map { "10.0.0.\($0):22000" }
        let race = PairRace(certificate: certificate, direct: addresses + ["10.0.0.1:22000"], relays: [], context: nil,
                            progress: { _ in }, completion: { _ in })
        var started: [String] = []
        while let next = race.nextAddress() { started.append(next) }
        #expect(started == Array(addresses.prefix(PairRace.maxInFlight)))
        // One fails: the next one goes; none has won, some are still in flight.
        race.ended()
        #expect(race.nextAddress() == addresses[8])
        #expect(!race.allFailed)
        // A handshake completes: it wins, a later one does not, and nothing more is dialled.
        race.ended()
        #expect(race.claim())
        race.ended()
        #expect(!race.claim())
        #expect(race.nextAddress() == nil && !race.allFailed)

        let lost = PairRace(certificate: certificate, direct: ["10.0.0.1:22000", "10.0.0.2:22000"], relays: [], context: nil,
                            progress: { _ in }, completion: { _ in })
        while lost.nextAddress() != nil {}
        lost.ended()
        #expect(!lost.allFailed)
        lost.ended()
        #expect(lost.allFailed)
    }
}
