import Testing
@testable import SyncEngine
import PeerCrypto
@testable import SyncpeerCLI

/// The progress line's layout: what it says for each status and that it fits the width.
struct ProgressLayoutTests {
    static let mb: Int64 = 1_000_000

    // The bar takes what the line leaves (10 to 30 columns) and fills by whole columns; the
    // percentage is rounded down (24.96 % is 24 %: never 100 % before the end); one column
    // stays free.
    @Test(arguments: [
        (TransferTrack.Status.moving(rate: 12_800_000, eta: 3.8), 60, "big.bin  22% [##----------] 13.9/62.9 MB 12.8 MB/s ETA 0:04"),
        (.stalled, 60, "big.bin  24% [#####------------------] 15.7/62.9 MB stalled"),
        (.reconnecting, 40, "big.bin  24% 15.7/62.9 MB reconnecting…"),
        (.resuming, 30, "24% 15.7/62.9 MB resuming"),
        (.moving(rate: 12_800_000, eta: 3.8), 30, "22% 13.9/62.9 MB"),
        (.done, 60, "big.bin  100% [##############################] 62.9 MB done"),
        (.waiting(peer: "carol", offline: true), 80, "big.bin  0% [------------------------------] 0.0/62.9 MB waiting for carol…"),
        (.moving(rate: nil, eta: nil), 60, "big.bin  22% [######------------------------] 13.9/62.9 MB"),
    ] as [(TransferTrack.Status, Int, String)])
    func lines(_ status: TransferTrack.Status, _ width: Int, _ expected: String) {
        let bytes: Int64 = switch status {
        case .moving: 13_900_000
        case .done: 62_900_000
        case .waiting: 0
        default: 15_700_000
        }
        let line = ProgressLayout.line(name: "big.bin", bytes: bytes, total: 62_900_000, status: status, width: width, colour: false)
        #expect(line.plain == expected)
        #expect(line.plain.count < width)
    }

    /// Every status at every width from 12 to 200 columns fits (one column is left free).
    @Test func everyLineFits() {
        let statuses: [TransferTrack.Status] = [
            .preparing, .waiting(peer: "a-peer-with-a-long-name", offline: false), .moving(rate: 1e9, eta: 86_400), .stalled,
            .reconnecting, .resuming, .paused("disk full on the receiver: free some space, then resume"), .finishing, .done,
            .ended(.failed, "the receiver sent 9 chunks that failed verification"),
        ]
        for width in 12...200 {
            for status in statuses {
                let line = ProgressLayout.line(name: "a rather long file name of a holiday video.mkv", bytes: 123_456_789_012,
                                               total: 999_999_999_999, status: status, width: width, colour: true)
                #expect(line.plain.count <= width - 1, "\(width): \(line.plain)")
            }
        }
    }

    @Test func colourOnlyOnTheStatusAndOnlyWhenAsked() {
        let coloured = ProgressLayout.line(name: "a", bytes: 1, total: 2, status: .stalled, width: 80, colour: true)
        #expect(coloured.styled.contains("\u{1b}[33mstalled\u{1b}[0m"))
        let plain = ProgressLayout.line(name: "a", bytes: 1, total: 2, status: .stalled, width: 80, colour: false)
        #expect(!plain.styled.contains("\u{1b}"))
    }

    @Test(arguments: [(Int64(13_900_000), Int64(62_900_000), "13.9/62.9 MB"), (900_000, 62_900_000, "0.9/62.9 MB"),
                      (12, 999, "12/999 B"), (1_500, 2_000_000_000, "0.0/2.0 GB")] as [(Int64, Int64, String)])
    func amounts(_ done: Int64, _ total: Int64, _ expected: String) {
        #expect(ProgressLayout.formatPair(done, total) == expected)
    }
}

/// The status a transfer's events lead to, with the display's clock: a link cut and resume.
struct TransferTrackTests {
    static let bob = PeerRef(id: DeviceID(publicKey: KeyPair.generate().publicKey), name: "bob")

    static func info(_ state: TransferState, _ bytes: Int64, reason: String? = nil) -> TransferInfo {
        TransferInfo(transfer: "0123456789abcdef0123456789abcdef", direction: .send, peer: bob, name: "big.bin",
                     state: state, bytes: bytes, total: 62_900_000, reason: reason, time: 0)
    }

    @Test func aLinkCutAndResume() {
        let mb: Int64 = 1_000_000
        var track = TransferTrack(Self.info(.offered, 0), at: 0)
        #expect(track.status(at: 0.5) == .waiting(peer: "bob", offline: false))
        track.update(Self.info(.active, 0), at: 3)  // accepted after 3 s of waiting
        for second in 1...3 { track.update(Self.info(.active, Int64(second) * 5 * mb), at: 3 + Double(second)) }
        guard case let .moving(rate, eta) = track.status(at: 6) else { Issue.record("not moving"); return }
        #expect(abs((rate ?? 0) - 5_000_000) < 1)
        #expect(abs((eta ?? 0) - 47.9 / 5) < 0.01)
        // The link is cut: no event at all; within 2 s the line says so.
        #expect(track.status(at: 7.5) != .stalled)
        #expect(track.status(at: 8.1) == .stalled)
        track.update(Self.info(.paused, 15 * mb, reason: "connection to bob lost; resumes when it is back"), at: 9)
        #expect(track.status(at: 9) == .reconnecting)
        // Offered again: resuming, from what was held (the engine keeps the count).
        track.update(Self.info(.offered, 15 * mb), at: 12)
        #expect(track.status(at: 12) == .resuming)
        // The accept says the receiver holds 16 MB: a jump, not a rate of terabytes.
        track.update(Self.info(.active, 16 * mb), at: 12.2)
        track.update(Self.info(.active, 18 * mb), at: 12.7)
        track.update(Self.info(.active, 21 * mb), at: 13.2)
        guard case let .moving(after, _) = track.status(at: 13.2) else { Issue.record("not moving"); return }
        #expect(abs((after ?? 0) - 5_000_000) < 1)
        track.update(Self.info(.completed, 62_900_000), at: 20)
        #expect(track.status(at: 20) == .done)
        // Time moving: 6 s + 7.8 s (not the 3 s waiting for the accept nor the 3 s paused).
        #expect(abs(track.movingSeconds(at: 20) - (6 + 7.8)) < 0.01)
    }

    @Test func anOfflinePeerIsWaitedFor() {
        let track = TransferTrack(Self.info(.paused, 0, reason: "waiting for bob to reconnect"), at: 0)
        #expect(track.status(at: 0) == .waiting(peer: "bob", offline: true))
    }

    @Test func aFullDiskIsAPauseWithItsReason() {
        var track = TransferTrack(Self.info(.active, 0), at: 0)
        track.update(Self.info(.paused, 5, reason: "bob could not finish: disk full"), at: 1)
        #expect(track.status(at: 1) == .paused("bob could not finish: disk full"))
    }
}
