import Foundation
import Glibc
@testable import PeerFiles
import Testing

/// `FolderRoot`: the decision (a table), and observing and adopting real directories.
struct FolderRootTests {
    static let shared = RootIdentity(device: 10, inode: 2)
    static let other = RootIdentity(device: 11, inode: 2)

    struct Case: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let observation: RootObservation
        let expected: RootIdentity?
        let liveEntries: Int
        let verdict: RootVerdict
    }

    static func seen(_ identity: RootIdentity, _ marker: RootObservation.Marker, empty: Bool) -> RootObservation {
        RootObservation(identity: identity, marker: marker, isEmpty: empty)
    }

    @Test(arguments: [
        Case(testDescription: "the adopted root with its marker", observation: seen(shared, .folder("abcde-fghij"), empty: false),
             expected: shared, liveEntries: 1_500, verdict: .trusted),
        Case(testDescription: "the adopted root, emptied (the guard on deletions judges that)",
             observation: seen(shared, .folder("abcde-fghij"), empty: true), expected: shared, liveEntries: 1_500, verdict: .trusted),
        Case(testDescription: "an unmounted disk's empty mount point", observation: seen(other, .absent, empty: true),
             expected: shared, liveEntries: 1_500, verdict: .refused(.replaced(markerPresent: false, empty: true))),
        Case(testDescription: "a folder moved away and re-created with other files", observation: seen(other, .absent, empty: false),
             expected: shared, liveEntries: 12, verdict: .refused(.replaced(markerPresent: false, empty: false))),
        Case(testDescription: "a copy of the folder (marker, other inode)", observation: seen(other, .folder("abcde-fghij"), empty: false),
             expected: shared, liveEntries: 12, verdict: .refused(.replaced(markerPresent: true, empty: false))),
        Case(testDescription: "the marker deleted", observation: seen(shared, .absent, empty: false),
             expected: shared, liveEntries: 12, verdict: .refused(.markerMissing(empty: false))),
        Case(testDescription: "another folder's marker", observation: seen(shared, .folder("zzzzz-zzzzz"), empty: false),
             expected: shared, liveEntries: 12, verdict: .refused(.otherFolder(folderID: "zzzzz-zzzzz"))),
        Case(testDescription: "not adopted yet: another folder's marker", observation: seen(other, .folder("zzzzz-zzzzz"), empty: false),
             expected: nil, liveEntries: 0, verdict: .refused(.otherFolder(folderID: "zzzzz-zzzzz"))),
        Case(testDescription: "not adopted yet (older version): a root with content", observation: seen(other, .absent, empty: false),
             expected: nil, liveEntries: 1_500, verdict: .adopt),
        Case(testDescription: "not adopted yet: our marker", observation: seen(other, .folder("abcde-fghij"), empty: true),
             expected: nil, liveEntries: 1_500, verdict: .adopt),
        Case(testDescription: "a new share or an accepted folder: empty, nothing synced", observation: seen(other, .absent, empty: true),
             expected: nil, liveEntries: 0, verdict: .adopt),
        Case(testDescription: "not adopted yet: empty while the index has entries (unmounted?)", observation: seen(other, .absent, empty: true),
             expected: nil, liveEntries: 1_500, verdict: .refused(.emptyNotAdopted(entries: 1_500))),
    ])
    func judge(_ c: Case) {
        #expect(FolderRoot.judge(c.observation, folderID: "abcde-fghij", expected: c.expected, liveEntries: c.liveEntries) == c.verdict)
    }

    @Test func everyProblemSaysWhatWasFound() {
        let problems: [(RootProblem, String)] = [
            (.missing(path: "/m", reason: "it does not exist"), "/m is missing"),
            (.replaced(markerPresent: false, empty: true), "unmounted disk"),
            (.replaced(markerPresent: false, empty: false), "another directory"),
            (.replaced(markerPresent: true, empty: false), "a copy of it"),
            (.markerMissing(empty: false), ".syncpeer-folder"),
            (.otherFolder(folderID: "zzzzz-zzzzz"), "zzzzz-zzzzz"),
            (.emptyNotAdopted(entries: 7), "7 files and folders"),
        ]
        for (problem, text) in problems { #expect(problem.description.contains(text), "\(problem.description)") }
    }

    @Test func adoptWritesTheMarkerAndObserveReadsIt() throws {
        try withTemporaryDirectory { dir in
            guard case .success(let before) = FolderRoot.observe(dir) else { Issue.record("observe failed"); return }
            #expect(before.marker == .absent && before.isEmpty)
            let identity = try FolderRoot.adopt(dir, folderID: "abcde-fghij")
            let st = Tree.stat(dir)
            #expect(identity == RootIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)))
            #expect(try String(contentsOfFile: dir + "/.syncpeer-folder", encoding: .utf8) == "abcde-fghij\n")
            #expect(!FileManager.default.fileExists(atPath: dir + "/.syncpeer-folder.syncpeer-tmp"), "no temporary file is left")
            guard case .success(let after) = FolderRoot.observe(dir) else { Issue.record("observe failed"); return }
            #expect(after == RootObservation(identity: identity, marker: .folder("abcde-fghij"), isEmpty: true),
                    "the marker alone leaves the root empty")
            try Tree.write(dir + "/a.txt", "a")
            guard case .success(let full) = FolderRoot.observe(dir) else { Issue.record("observe failed"); return }
            #expect(!full.isEmpty)
            // Adopting again (`syncpeer confirm`) replaces another folder's marker.
            try Tree.write(dir + "/.syncpeer-folder", "zzzzz-zzzzz\r\n")
            guard case .success(let foreign) = FolderRoot.observe(dir) else { Issue.record("observe failed"); return }
            #expect(foreign.marker == .folder("zzzzz-zzzzz"))
            _ = try FolderRoot.adopt(dir, folderID: "abcde-fghij")
            guard case .success(let readopted) = FolderRoot.observe(dir) else { Issue.record("observe failed"); return }
            #expect(readopted.marker == .folder("abcde-fghij"))
        }
    }

    @Test func aMissingOrFileRootIsMissing() throws {
        try withTemporaryDirectory { dir in
            #expect(FolderRoot.observe(dir + "/nope") == .failure(.missing(path: dir + "/nope", reason: "it does not exist")))
            try Tree.write(dir + "/file", "x")
            #expect(FolderRoot.observe(dir + "/file") == .failure(.missing(path: dir + "/file", reason: "it is not a directory")))
            #expect(throws: FileError.self) { try FolderRoot.adopt(dir + "/nope", folderID: "abcde-fghij") }
        }
    }

    @Test func theMarkerIsNeverScanned() throws {
        try withTemporaryDirectory { dir in
            _ = try FolderRoot.adopt(dir, folderID: "abcde-fghij")
            try Tree.write(dir + "/a.txt", "a")
            try Tree.mkdir(dir + "/sub")
            try Tree.write(dir + "/sub/.syncpeer-folder", "nested-folder\n")
            var known = KnownEntryList()
            let (result, _) = try scanAndApply(FolderScanner(root: dir), &known)
            #expect(Set(result.added.keys) == ["a.txt", "sub"])
            #expect(IgnorePatterns().isIgnored(".syncpeer-folder", isDirectory: false))
        }
    }
}
