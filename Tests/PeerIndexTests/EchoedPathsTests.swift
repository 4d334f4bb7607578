import PeerModel
@testable import PeerIndex
import Testing

/// `echoedPaths` looks paths up a group at a time: over several groups (the last one short),
/// a peer's entry is an echo when it equals our record or our record dominates it, and not
/// when it is newer, when either side is missing, or for another peer.
@Suite struct EchoedPathsTests {
    @Test func echoesAreFoundOverSeveralGroupsOfPaths() throws {
        let index = try FolderIndexTests().populatedIndex()
        let count = 2 * NodeIndex.echoGroup + 22
        var remote: [RemoteFileRecord] = []
        for i in 0..<count {
            let local = sampleFile("docs", "p\(i)", seed: i, by: 1, counter: 3)
            try index.upsertFiles([local])
            var entry = local.entry
            entry.sequence = Int64(i + 1)
            switch i % 3 {
            case 0: break                                              // the same entry: an echo
            case 1: entry.version = [deviceID(1): 2]; entry.size += 1  // older, other content: dominated
            default: entry.version = [deviceID(1): 3, deviceID(2): 1]  // newer: not an echo
            }
            if i % 10 != 9 { remote.append(RemoteFileRecord(entry, manifest: nil)) }   // some paths have no entry of the peer
        }
        remote.append(sampleRemote("only-theirs", sequence: Int64(count + 1)))
        try index.upsertRemoteFiles(folderID: "docs", deviceID: deviceID(2), remote)
        let asked = (0..<count).map { "p\($0)" } + ["only-theirs", "nowhere"]
        let echoed = try index.echoedPaths(folderID: "docs", deviceID: deviceID(2), paths: asked, keyedBy: { $0 })
        let expected = Set((0..<count).filter { $0 % 3 != 2 && $0 % 10 != 9 }.map { "p\($0)" })
        #expect(echoed == expected)
        #expect(try index.echoedPaths(folderID: "docs", deviceID: deviceID(3), paths: asked, keyedBy: { $0 }).isEmpty)
        #expect(try index.echoedPaths(folderID: "docs", deviceID: deviceID(2), paths: [String](), keyedBy: { $0 }).isEmpty)
    }
}
