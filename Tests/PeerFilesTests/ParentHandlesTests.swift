import Foundation
import Glibc
import PeerFiles
import Testing

/// `ParentHandles`: the puller's directories opened once per batch, with `SafePath.resolve`'s
/// refusals kept.
@Suite struct ParentHandlesTests {
    @Test func filesOfOneDirectoryShareItsHandle() throws {
        try withTemporaryDirectory { dir in
            try FileManager.default.createDirectory(atPath: dir + "/a/b", withIntermediateDirectories: true)
            try writeFile(dir + "/a/b/x", [1])
            let root = try DirectoryHandle(path: dir)
            var parents = ParentHandles()
            let x = try parents.resolve(SafePath("a/b/x"), under: root)
            let y = try parents.resolve(SafePath("a/b/y"), under: root)
            #expect(x.directory === y.directory, "one open of a/b for both")
            #expect(x.existing == .file && y.existing == nil, "what is at each name is looked up every time")
            #expect(y.name == "y" && y.directory.path == dir + "/a/b")
            let top = try parents.resolve(SafePath("top"), under: root)
            #expect(top.directory === root && parents.count == 1)
        }
    }

    /// Two directories whose names differ only by Unicode normalization are two parents
    /// (the shortcut for the parent resolved last compared them as `String`s: equal, so the
    /// second file went into the first directory).
    @Test func parentsThatDifferOnlyByNormalizationAreTwo() throws {
        try withTemporaryDirectory { dir in
            let composed = "Ordner-caf\u{E9}", decomposed = "Ordner-cafe\u{301}"
            try #require(composed == decomposed && Array(composed.utf8) != Array(decomposed.utf8))
            for name in [composed, decomposed] { try #require(mkdir(dir + "/" + name, 0o755) == 0) }
            let root = try DirectoryHandle(path: dir)
            var parents = ParentHandles()
            let first = try parents.resolve(SafePath(composed + "/a.txt"), under: root)
            let second = try parents.resolve(SafePath(decomposed + "/a.txt"), under: root)
            #expect(first.directory !== second.directory)
            #expect(Array(second.directory.path.utf8) == Array((dir + "/" + decomposed).utf8))
        }
    }

    @Test func aLinkedParentIsRefusedAsByResolve() throws {
        try withTemporaryDirectory { dir in
            try FileManager.default.createDirectory(atPath: dir + "/root/real", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: dir + "/outside", withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: dir + "/root/link", withDestinationPath: dir + "/outside")
            let root = try DirectoryHandle(path: dir + "/root")
            var parents = ParentHandles()
            _ = try parents.resolve(SafePath("real/x"), under: root)
            let linked = try SafePath("link/x")
            do {
                _ = try parents.resolve(linked, under: root)
                Issue.record("resolved through a symbolic link")
            } catch let error as FileError {
                #expect(error.kind == .symlinkRefused)
            }
        }
    }

    @Test func clearLetsAMovedDirectoryGo() throws {
        try withTemporaryDirectory { dir in
            try FileManager.default.createDirectory(atPath: dir + "/d", withIntermediateDirectories: true)
            let root = try DirectoryHandle(path: dir)
            var parents = ParentHandles()
            let before = try parents.resolve(SafePath("d/x"), under: root)
            // The user moves the directory and makes another one under its name.
            #expect(rename(dir + "/d", dir + "/moved") == 0)
            try FileManager.default.createDirectory(atPath: dir + "/d", withIntermediateDirectories: true)
            #expect(try parents.resolve(SafePath("d/x"), under: root).directory === before.directory,
                    "held: the holder checks it is in place")
            parents.clear()
            let after = try parents.resolve(SafePath("d/x"), under: root)
            var held = stat(), now = stat()
            #expect(fstat(after.directory.fd, &held) == 0 && stat(dir + "/d", &now) == 0)
            #expect(held.st_ino == now.st_ino, "opened again after clear: the directory at the path now")
        }
    }

    @Test func holdsAtMostItsLimit() throws {
        try withTemporaryDirectory { dir in
            let root = try DirectoryHandle(path: dir)
            var parents = ParentHandles()
            for n in 0..<(ParentHandles.limit + 10) {
                try FileManager.default.createDirectory(atPath: dir + "/d\(n)", withIntermediateDirectories: false)
                _ = try parents.resolve(SafePath("d\(n)/f"), under: root)
                #expect(parents.count <= ParentHandles.limit)
            }
        }
    }
}
