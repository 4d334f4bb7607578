import Foundation
import Glibc
import PeerFiles
import Testing

/// `placeNew`, `replace` and `remove`: what another process put at a name is never replaced
/// or removed unless it is the version the caller expected.
@Suite struct PlaceTests {
    func content(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    @Test func placeNewNeverReplaces() throws {
        try withTemporaryDirectory { dir in
            let handle = try DirectoryHandle(path: dir)
            try Tree.write(dir + "/.tmp", "pulled")
            #expect(handle.placeNew(".tmp", as: "f") == .done)
            #expect(content(dir + "/f") == "pulled")
            #expect(handle.entryKind(".tmp") == nil)

            // The user saved a file there since the check: it stays.
            try Tree.write(dir + "/.tmp", "pulled again")
            try Tree.write(dir + "/g", "the user's")
            #expect(handle.placeNew(".tmp", as: "g") == .changedHere)
            #expect(content(dir + "/g") == "the user's")
            #expect(content(dir + "/.tmp") == "pulled again")
            #expect(handle.placeNew(".missing", as: "h") == .failed(ENOENT))
        }
    }

    @Test func replaceTakesOutOnlyTheExpectedVersion() throws {
        try withTemporaryDirectory { dir in
            let handle = try DirectoryHandle(path: dir)
            try Tree.write(dir + "/f", "old")
            try Tree.write(dir + "/.tmp", "new")
            var seen: String?
            #expect(handle.replace("f", with: ".tmp") { seen = content(dir + "/" + $0); return true } == .done)
            #expect(seen == "old", "the check looks at the entry that came out")
            #expect(content(dir + "/f") == "new")
            #expect(handle.entryKind(".tmp") == nil)

            // Asked to, the replaced version stays at the temporary name for the caller.
            try Tree.write(dir + "/.tmp", "newest")
            #expect(handle.replace("f", with: ".tmp", removingOutgoing: false) { _ in true } == .done)
            #expect(content(dir + "/f") == "newest")
            #expect(content(dir + "/.tmp") == "new", "the version that came out, left for the caller")
            try FileManager.default.removeItem(atPath: dir + "/.tmp")

            // The user edited f after the caller's last look: the edit goes back in place.
            try Tree.write(dir + "/f", "edited by the user")
            try Tree.write(dir + "/.tmp", "newer")
            #expect(handle.replace("f", with: ".tmp") { _ in false } == .changedHere)
            #expect(content(dir + "/f") == "edited by the user")
            #expect(content(dir + "/.tmp") == "newer")

            // Deleted by the user since: nothing is put there.
            try FileManager.default.removeItem(atPath: dir + "/f")
            #expect(handle.replace("f", with: ".tmp") { _ in true } == .changedHere)
            #expect(handle.entryKind("f") == nil)
        }
    }

    @Test func removeTakesAwayOnlyTheExpectedVersion() throws {
        try withTemporaryDirectory { dir in
            let handle = try DirectoryHandle(path: dir)
            try Tree.write(dir + "/f", "synced")
            #expect(handle.remove("f", via: ".aside") { content(dir + "/" + $0) == "synced" } == .done)
            #expect(handle.entryKind("f") == nil)
            #expect(handle.entryKind(".aside") == nil)

            try Tree.write(dir + "/g", "saved by the user since")
            try Tree.write(dir + "/.aside", "left by a killed daemon")
            #expect(handle.remove("g", via: ".aside") { _ in false } == .changedHere)
            #expect(content(dir + "/g") == "saved by the user since")
            #expect(handle.entryKind(".aside") == nil)

            #expect(handle.remove("missing", via: ".aside") { _ in true } == .done)
            Tree.symlink(dir + "/link", to: "somewhere")
            #expect(handle.remove("link", via: ".aside") { _ in true } == .done)
            #expect(handle.entryKind("link") == nil)
        }
    }

    /// What came out cannot go back (a new entry took the name meanwhile): the caller is told
    /// where it is, it is never removed.
    @Test func aVersionThatCannotGoBackIsStrandedNotLost() throws {
        try withTemporaryDirectory { dir in
            let handle = try DirectoryHandle(path: dir)
            try Tree.write(dir + "/g", "the user's first save")
            let outcome = handle.remove("g", via: ".aside") { _ in
                try? Tree.write(dir + "/g", "the user's second save")
                return false
            }
            #expect(outcome == .stranded(".aside"))
            #expect(content(dir + "/.aside") == "the user's first save")
            #expect(content(dir + "/g") == "the user's second save")
        }
    }
}
