import PeerModel
import Dispatch
import Foundation
import PeerFiles
import PeerIndex
@testable import SyncEngine
import Testing

/// A peer's echo (issue 43, B): once a peer has pulled our files it announces them back
/// under our versions. The entries are stored, but planning them found nothing to do and
/// cost alice 15 % of her CPU in B; they are not planned. A change hidden behind an
/// equal-looking version still is.
@Suite struct EchoPlanningTests {
    typealias Fixture = FolderHostTests.Fixture

    @Test func aPeersEchoOfOurEntriesIsStoredButNotPlanned() throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        let host = fixture.host
        for name in ["echo1.txt", "echo2.txt", "stale.txt", "tie.txt"] {
            try "ours: \(name)".write(toFile: fixture.root + "/" + name, atomically: false, encoding: .utf8)
        }
        try FileManager.default.createDirectory(atPath: fixture.root + "/sub", withIntermediateDirectories: true)
        // Older than the peer's state of it (`remoteHas`: 2023): the tie goes to the peer.
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_600_000_000)],
                                              ofItemAtPath: fixture.root + "/tie.txt")
        let folder = try fixture.startSettled()
        defer { folder.stop() }
        let first = try host.index.files(folderID: fixture.folderID)
        #expect(first.count == 5 && first.allSatisfy { $0.version == [host.localDevice: 1] })
        // stale.txt changes here after the peer took it: its echo of the first state is dominated.
        try "ours, edited".write(toFile: fixture.root + "/stale.txt", atomically: false, encoding: .utf8)
        try TransferPair.eventually("the edit is recorded") {
            (try? host.index.file(folderID: fixture.folderID, path: "stale.txt"))??.version == [host.localDevice: 2]
        }
        folder.io.sync {}   // (the scan's own pull of stale.txt is done before the peer has it)

        // The peer reports back every entry it took, as we sent it (sequence its own).
        let echo = first.filter { $0.path != "tie.txt" }.map { record in
            var entry = record.entry
            entry.sequence = 7
            return RemoteFileRecord(entry, manifest: record.manifest?.encode())
        }
        try host.index.upsertRemoteFiles(folderID: fixture.folderID, deviceID: host.remoteDevice, echo, receivedSequence: 7)
        // In the same page, two real changes: a newer version, and our version with other
        // content (a tie, as merges on different nodes make): both must be planned.
        let newer = try fixture.remoteHas("new.bin", size: 5_000, seed: 3, version: [host.remoteDevice: 1])
        try fixture.remoteHas("tie.txt", size: 9, seed: 4, version: [host.localDevice: 1], content: Data("theirs!!!".utf8))

        let planned = folder.peerPlannedPaths
        folder.pullSoon(Set(first.map { PathKey($0.path) } + [PathKey("new.bin")]), from: host.remoteDevice)
        try TransferPair.eventually("the new file is placed") { fixture.holds("new.bin", newer) }
        try TransferPair.eventually("the tie is broken: theirs is taken, ours kept as a conflict copy") {
            fixture.holds("tie.txt", Data("theirs!!!".utf8)) && fixture.names.contains { $0.hasPrefix("tie.sync-conflict-") }
        }
        folder.io.sync {}
        #expect(folder.peerPlannedPaths - planned == 2, "planned \(folder.peerPlannedPaths - planned) paths, not the echo's 4")
        // The echo is stored, what we hold is as it was, and the peer counts as holding it.
        #expect(try host.index.remoteFiles(folderID: fixture.folderID, deviceID: host.remoteDevice).count == 6)
        #expect(try String(contentsOfFile: fixture.root + "/echo1.txt", encoding: .utf8) == "ours: echo1.txt")
        #expect(try host.index.file(folderID: fixture.folderID, path: "echo1.txt")?.version == [host.localDevice: 1])
        #expect(try host.index.file(folderID: fixture.folderID, path: "stale.txt")?.version == [host.localDevice: 2])

        // A page without its sender (as tests and older callers give) is planned whole.
        let again = folder.peerPlannedPaths
        folder.pullSoon([PathKey("echo1.txt"), PathKey("sub")])
        folder.io.sync {}
        folder.io.sync {}
        #expect(folder.peerPlannedPaths - again == 2)
    }

    /// A rescan of some paths plans them again (a change may conflict with a state a peer
    /// sent before it was scanned), but only those a peer has: after a scan of 50,000 new
    /// files (D), reading and planning paths no peer has cost alice 4.6 % of her CPU.
    @Test func aScanPlansOnlyThePathsAPeerHas() throws {
        let fixture = try Fixture()
        defer { fixture.cleanup() }
        let host = fixture.host
        let folder = try fixture.startSettled()
        defer { folder.stop() }
        // The peer's state of late.txt is stored, its pull not yet run; then late.txt is
        // written here too, with three files no peer has.
        try fixture.remoteHas("late.txt", size: 6, seed: 5, content: Data("theirs".utf8))
        let planned = folder.peerPlannedPaths
        for name in ["new1.txt", "new2.txt", "new3.txt", "late.txt"] {
            try "ours: \(name)".write(toFile: fixture.root + "/" + name, atomically: false, encoding: .utf8)
        }
        try TransferPair.eventually("the four files are recorded") {
            ((try? host.index.files(folderID: fixture.folderID)) ?? []).count == 4
        }
        folder.io.sync {}
        #expect(folder.peerPlannedPaths - planned == 1, "planned \(folder.peerPlannedPaths - planned) paths, not only late.txt")
        // Concurrent with the peer's, ours is newer: it stays, recorded as our change.
        #expect(try String(contentsOfFile: fixture.root + "/late.txt", encoding: .utf8) == "ours: late.txt")
        #expect(try host.index.file(folderID: fixture.folderID, path: "late.txt")?.version == [host.localDevice: 1])
    }
}
