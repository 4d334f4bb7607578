import Foundation
import Glibc
import PeerFiles
import Testing

/// `makeNewSubdirectory`: a new folder right in the directory, never an existing entry,
/// never through a link, never from a name that is a path.
@Suite struct NewSubdirectoryTests {
    @Test func aFreeNameIsUsedAndATakenOneIsNumbered() throws {
        try withTemporaryDirectory { dir in
            let handle = try DirectoryHandle(path: dir)
            #expect(try handle.makeNewSubdirectory(for: "Photos").name == "Photos")
            #expect(try handle.makeNewSubdirectory(for: "Photos").name == "Photos (1)")
            try Data().write(to: URL(fileURLWithPath: dir + "/notes"))
            #expect(try handle.makeNewSubdirectory(for: "notes").name == "notes (1)")
            let made = try handle.makeNewSubdirectory(for: "x")
            #expect(made.handle.path == dir + "/x")
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/x").isEmpty)
        }
    }

    /// A link with the wanted name (to a folder outside) is taken, not followed: nothing
    /// is created where it points.
    @Test func aLinkWithTheNameIsNeverFollowed() throws {
        try withTemporaryDirectory { dir in
            try FileManager.default.createDirectory(atPath: dir + "/inside", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: dir + "/outside", withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: dir + "/inside/Shared", withDestinationPath: dir + "/outside")
            let made = try DirectoryHandle(path: dir + "/inside").makeNewSubdirectory(for: "Shared")
            #expect(made.name == "Shared (1)")
            var st = stat()
            #expect(lstat(dir + "/inside/Shared (1)", &st) == 0 && st.st_mode & S_IFMT == S_IFDIR)
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/outside").isEmpty)
        }
    }

    @Test(arguments: ["a/b", "../x", "..", ".", "", "bad\u{1B}name", String(repeating: "x", count: 256)])
    func aNameThatIsNotOneComponentIsRefused(_ name: String) throws {
        try withTemporaryDirectory { dir throws in
            #expect(throws: (any Error).self) { try DirectoryHandle(path: dir).makeNewSubdirectory(for: name) }
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
        }
    }
}
