import Foundation
@testable import PeerIndex
import Testing

/// What members said they hold (0012): replaced whole per member, only for a member, and
/// gone with the membership or the folder.
@Suite struct PeerSelectionIndexTests {
    @Test func aMembersSelectionIsReplacedWholeAndGoesWithTheMembership() throws {
        let index = try SelectionIndexTests().index()
        let (bob, carol) = (deviceID(2), deviceID(3))
        #expect(try index.peerSelections(folderID: "docs") == [:])
        try index.setPeerSelection(folderID: "docs", deviceID: bob, paths: ["b", "a/x"])
        try index.setPeerSelection(folderID: "docs", deviceID: carol, paths: ["c"])
        #expect(try index.peerSelections(folderID: "docs") == [bob: ["a/x", "b"], carol: ["c"]])
        try index.setPeerSelection(folderID: "docs", deviceID: bob, paths: [])
        #expect(try index.peerSelections(folderID: "docs") == [carol: ["c"]])
        // Not a member (device 1), or not a folder: refused.
        #expect(throws: IndexError.self) { try index.setPeerSelection(folderID: "docs", deviceID: deviceID(1), paths: ["a"]) }
        #expect(throws: IndexError.self) { try index.setPeerSelection(folderID: "nope", deviceID: bob, paths: ["a"]) }
        _ = try index.removeFolderPeer(folderID: "docs", deviceID: carol)
        #expect(try index.peerSelections(folderID: "docs") == [:])
        try index.setPeerSelection(folderID: "docs", deviceID: bob, paths: ["a"])
        _ = try index.removeFolder(id: "docs")
        try index.addFolder(id: "docs", path: "/home/u/Documents")
        try index.addFolderPeer(folderID: "docs", deviceID: bob)
        #expect(try index.peerSelections(folderID: "docs") == [:])
    }
}
