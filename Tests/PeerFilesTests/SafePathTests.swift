import Foundation
import PeerFiles
import Testing

@Suite struct SafePathTests {
    struct Hostile: Sendable, CustomTestStringConvertible {
        var name: String
        var path: String
        var error: SafePathError
        var testDescription: String { name }
    }

    static let long = String(repeating: "a", count: 256)

    static let hostile: [Hostile] = [
        Hostile(name: "empty", path: "", error: .empty),
        Hostile(name: "absolute", path: "/etc/passwd", error: .absolute),
        Hostile(name: "root alone", path: "/", error: .absolute),
        Hostile(name: "parent at start", path: "../x", error: .parentDirectory(index: 0)),
        Hostile(name: "parent in the middle", path: "a/../../etc/passwd", error: .parentDirectory(index: 1)),
        Hostile(name: "parent alone", path: "..", error: .parentDirectory(index: 0)),
        Hostile(name: "parent at end", path: "a/..", error: .parentDirectory(index: 1)),
        Hostile(name: "current directory", path: "./a", error: .currentDirectory(index: 0)),
        Hostile(name: "current directory inside", path: "a/./b", error: .currentDirectory(index: 1)),
        Hostile(name: "dot alone", path: ".", error: .currentDirectory(index: 0)),
        Hostile(name: "double slash", path: "a//b", error: .emptyComponent(index: 1)),
        Hostile(name: "trailing slash", path: "a/", error: .emptyComponent(index: 1)),
        Hostile(name: "NUL", path: "a\u{0}b", error: .controlCharacter(byte: 0, offset: 1)),
        Hostile(name: "newline", path: "evil\nname", error: .controlCharacter(byte: 0x0A, offset: 4)),
        Hostile(name: "escape (terminal injection)", path: "x\u{1B}[2J", error: .controlCharacter(byte: 0x1B, offset: 1)),
        Hostile(name: "unit separator U+001F", path: "a\u{1F}", error: .controlCharacter(byte: 0x1F, offset: 1)),
        Hostile(name: "DEL U+007F", path: "a\u{7F}", error: .controlCharacter(byte: 0x7F, offset: 1)),
        Hostile(name: "tab", path: "a\tb", error: .controlCharacter(byte: 0x09, offset: 1)),
        Hostile(name: "backslash", path: "a\\b", error: .backslash(offset: 1)),
        Hostile(name: "windows parent", path: "..\\..\\x", error: .backslash(offset: 2)),
        Hostile(name: "component of 256 bytes", path: "d/" + long, error: .componentTooLong(index: 1, length: 256, limit: 255)),
        Hostile(name: "component of 256 bytes in UTF-8 (128 × é)", path: String(repeating: "é", count: 128),
                error: .componentTooLong(index: 0, length: 256, limit: 255)),
        Hostile(name: "path of 4,097 bytes", path: Array(repeating: String(repeating: "a", count: 200), count: 20).joined(separator: "/") + "/" + String(repeating: "b", count: 77),
                error: .pathTooLong(length: 4_097, limit: 4_096)),
    ]

    @Test(arguments: hostile)
    func refuses(hostile: Hostile) {
        #expect(throws: hostile.error) { try SafePath(hostile.path) }
        #expect(throws: hostile.error) { try SafePath(bytes: Array(hostile.path.utf8)) }
        #expect(hostile.error.description.hasPrefix("refused path: "))
    }

    struct BadBytes: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var offset: Int
        var testDescription: String { name }
    }

    @Test(arguments: [
        BadBytes(name: "overlong slash C0 AF", bytes: [0x61, 0xC0, 0xAF, 0x62], offset: 1),
        BadBytes(name: "overlong dot-dot E0 80 AE", bytes: [0xE0, 0x80, 0xAE], offset: 0),
        BadBytes(name: "lone continuation byte", bytes: [0x61, 0x80], offset: 1),
        BadBytes(name: "0xFF", bytes: [0xFF], offset: 0),
        BadBytes(name: "UTF-16 surrogate ED A0 80", bytes: [0x61, 0x62, 0xED, 0xA0, 0x80], offset: 2),
        BadBytes(name: "above U+10FFFF F4 90 80 80", bytes: [0xF4, 0x90, 0x80, 0x80], offset: 0),
        BadBytes(name: "truncated sequence E2 82", bytes: [0x61, 0xE2, 0x82], offset: 1),
        BadBytes(name: "Latin-1 é", bytes: [0x63, 0x61, 0x66, 0xE9], offset: 3),
    ])
    func refusesInvalidUTF8(bad: BadBytes) {
        #expect(throws: SafePathError.invalidUTF8(offset: bad.offset)) { try SafePath(bytes: bad.bytes) }
    }

    @Test(arguments: [
        ("a", ["a"]),
        ("docs/report.pdf", ["docs", "report.pdf"]),
        (".bashrc", [".bashrc"]),
        ("...", ["..."]),
        ("a/..b/c..", ["a", "..b", "c.."]),
        ("café/日本語 ✓.txt", ["café", "日本語 ✓.txt"]),
        ("with space/ x ", ["with space", " x "]),
        (String(repeating: "a", count: 255), [String(repeating: "a", count: 255)]),
    ])
    func accepts(path: String, components: [String]) throws {
        let p = try SafePath(path)
        #expect(p.components == components)
        #expect(p.string == path)
        #expect(try SafePath(bytes: Array(path.utf8)) == p)
    }

    @Test func acceptsExactlyTheLimits() throws {
        let path = Array(repeating: String(repeating: "a", count: 254), count: 16).joined(separator: "/")
            + "/" + String(repeating: "b", count: 16)
        #expect(path.utf8.count == 4_096)
        _ = try SafePath(path)   // 4,096 bytes: accepted
        #expect(throws: SafePathError.pathTooLong(length: 4_097, limit: 4_096)) { try SafePath(path + "c") }
    }

    @Test func validateName() throws {
        #expect(try SafePath.validateName("a.txt") == "a.txt")
        #expect(throws: SafePathError.slashInName(offset: 1)) { try SafePath.validateName("a/b") }
        #expect(throws: SafePathError.parentDirectory(index: 0)) { try SafePath.validateName("..") }
    }

    // MARK: - Resolution under a root

    @Test func symlinkInTheTreeIsRefused() throws {
        try withTemporaryDirectory { dir in
            let root = dir + "/root"
            let outside = dir + "/outside"
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: root + "/link", withDestinationPath: outside)
            try FileManager.default.createDirectory(atPath: root + "/real/deeper", withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: root + "/real/deeper/up", withDestinationPath: "../../..")
            let handle = try DirectoryHandle(path: root)

            for path in ["link/x", "link/a/b/c", "real/deeper/up/outside/x"] {
                for create in [false, true] {
                    do {
                        _ = try SafePath.resolve(relative: path, under: handle, createDirectories: create)
                        Issue.record("\(path) was resolved through a symbolic link")
                    } catch let error as FileError {
                        #expect(error.kind == .symlinkRefused, "\(path): \(error)")
                        #expect(error.description.contains("symbolic link"))
                    }
                }
            }
            // Nothing was created outside.
            #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
        }
    }

    @Test func resolvesAndCreatesDirectories() throws {
        try withTemporaryDirectory { dir in
            let handle = try DirectoryHandle(path: dir)
            // Missing directories without `createDirectories`: not found.
            #expect(throws: FileError.self) { try SafePath.resolve(relative: "a/b/c.txt", under: handle) }
            let resolved = try SafePath.resolve(relative: "a/b/c.txt", under: handle, createDirectories: true)
            #expect(resolved.name == "c.txt")
            #expect(resolved.existing == nil)
            #expect(resolved.directory.path == dir + "/a/b")
            var isDir: ObjCBool = false
            #expect(FileManager.default.fileExists(atPath: dir + "/a/b", isDirectory: &isDir) && isDir.boolValue)

            // A regular file where a directory is expected.
            try writeFile(dir + "/a/file", [1])
            do {
                _ = try SafePath.resolve(relative: "a/file/x", under: handle)
                Issue.record("resolved through a regular file")
            } catch let error as FileError {
                #expect(error.kind == .notADirectory)
            }
            // The last component may be anything; it is reported, never followed.
            try FileManager.default.createSymbolicLink(atPath: dir + "/a/b/link", withDestinationPath: "/etc/passwd")
            #expect(try SafePath.resolve(relative: "a/b/link", under: handle).existing == .symlink)
            #expect(try SafePath.resolve(relative: "a/file", under: handle).existing == .file)
            #expect(try SafePath.resolve(relative: "a/b", under: handle).existing == .directory)
            // Hostile names are refused before touching the file system.
            #expect(throws: SafePathError.parentDirectory(index: 0)) { try SafePath.resolve(relative: "../x", under: handle) }
        }
    }

    // MARK: - Unique names

    @Test(arguments: [
        ("report.pdf", "report (1).pdf"),
        ("Makefile", "Makefile (1)"),
        (".bashrc", ".bashrc (1)"),
        (".config.bak", ".config (1).bak"),
        ("archive.tar.gz", "archive.tar (1).gz"),
        ("notes.", "notes. (1)"),
        ("photo 2024.JPG", "photo 2024 (1).JPG"),
        ("日本語.txt", "日本語 (1).txt"),
    ])
    func firstNumberedName(name: String, expected: String) {
        #expect(SafePath.uniqueName(for: name) { $0 == name } == expected)
        #expect(SafePath.uniqueName(for: name) { _ in false } == name)
    }

    @Test func skipsTakenNumbers() {
        let taken: Set = ["a.txt", "a (1).txt", "a (2).txt", "a (4).txt"]
        #expect(SafePath.uniqueName(for: "a.txt") { taken.contains($0) } == "a (3).txt")
    }

    @Test func longNamesStayWithin255Bytes() throws {
        let name = String(repeating: "é", count: 125) + ".txt"   // 254 bytes
        let unique = SafePath.uniqueName(for: name) { $0 == name }
        #expect(unique.utf8.count <= 255)
        #expect(unique.hasSuffix(" (1).txt"))
        _ = try SafePath.validateName(unique)
    }

    @Test func uniqueNameInADirectory() throws {
        try withTemporaryDirectory { dir in
            let handle = try DirectoryHandle(path: dir)
            #expect(handle.uniqueName(for: "x.txt") == "x.txt")
            try writeFile(dir + "/x.txt", [1])
            try FileManager.default.createSymbolicLink(atPath: dir + "/x (1).txt", withDestinationPath: "/nonexistent")
            // A dangling link counts as taken, too.
            #expect(handle.uniqueName(for: "x.txt") == "x (2).txt")
        }
    }
}
