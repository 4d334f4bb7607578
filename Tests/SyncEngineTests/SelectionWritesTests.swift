import Foundation
import PeerFiles
import PeerIndex
import PeerWire
@testable import SyncEngine
import Testing

/// A member's announced selections (`folderSelection`) reach the index coalesced
/// (`PeerSelectionWrites`): a member that sends a new one in every frame cannot make us
/// commit one transaction per frame, and the latest is what is kept.
@Suite struct SelectionWritesTests {
    @Test func aFloodOfChangingSelectionsIsWrittenAFewTimesAndTheLatestKept() throws {
        let pair = try TransferPair()
        defer { pair.finish() }
        let shared = try pair.joinedFolder()
        // 500 announcements, each different from the one before, then the last.
        let flood: [Frame] = (0..<500).map { .folderSelection(folder: shared.folder, paths: [$0.isMultiple(of: 2) ? "x" : "y"]) }
        pair.bob.sendRaw(flood + [.folderSelection(folder: shared.folder, paths: ["z"])])
        try TransferPair.eventually("alice keeps bob's latest, in memory and in the index") {
            pair.alice.folders.peerSelection(shared.folder, device: pair.bob.deviceKey)?.paths == ["z"]
                && (try? pair.alice.index.peerSelections(folderID: shared.folder)) == [pair.bob.deviceKey: ["z"]]
        }
        let written = pair.alice.folders.peerSelectionWrites.written
        print("aFloodOfChangingSelectionsIsWrittenAFewTimesAndTheLatestKept: 501 announcements, \(written) writes")
        // The first at once, the rest together once the interval has passed (a slow machine
        // may split them further, never into one per frame).
        #expect(written >= 2 && written <= 10, "\(written) index writes for 501 announcements")
    }
}
