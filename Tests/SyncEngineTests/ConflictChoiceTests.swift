import Testing
@testable import SyncEngine

/// `resolve --keep WHO` picks a version by its author, never by its place.
@Suite struct ConflictChoiceTests {
    // bob's view after alice's edit won: the file is alice's, bob's edit is a copy.
    static let file = ConflictChoice.Version(path: "notes.txt", author: "AAAAAAA", mtimeNs: 2_000, atPath: true)
    static let bobCopy = ConflictChoice.Version(path: "notes.sync-conflict-20231114-221320-BBBBBBB.txt", author: "BBBBBBB", mtimeNs: 1_000, atPath: false)
    static let carolCopy = ConflictChoice.Version(path: "notes.sync-conflict-20231114-221321-CCCCCCC.txt", author: "CCCCCCC", mtimeNs: 1_500, atPath: false)
    static let alice = ConflictChoice.Author(short: "AAAAAAA", deviceID: "AAAAAAA" + String(repeating: "X", count: 49), name: "alice", isLocal: false)
    static let bob = ConflictChoice.Author(short: "BBBBBBB", deviceID: "BBBBBBB" + String(repeating: "Y", count: 49), name: "bob", isLocal: true)
    static let carol = ConflictChoice.Author(short: "CCCCCCC", deviceID: "CCCCCCC", name: "?", isLocal: false)

    struct Row: Sendable, CustomTestStringConvertible {
        let who: String
        let versions: [ConflictChoice.Version]
        let expected: ConflictChoice.Pick?
        var testDescription: String { "--keep \(who) among \(versions.map(\.author))" }
    }

    static let two = [file, bobCopy], three = [file, bobCopy, carolCopy]
    static let rows: [Row] = [
        Row(who: "bob", versions: two, expected: .version(bobCopy, by: bob)),
        Row(who: "local", versions: two, expected: .version(bobCopy, by: bob)),
        Row(who: "BOB", versions: two, expected: .version(bobCopy, by: bob)),
        Row(who: "bbbb", versions: two, expected: .version(bobCopy, by: bob)),
        Row(who: "alice", versions: two, expected: .version(file, by: alice)),
        Row(who: "remote", versions: two, expected: .version(file, by: alice)),
        Row(who: "AAAA-AAA", versions: two, expected: .version(file, by: alice)),
        Row(who: "both", versions: two, expected: .both),
        Row(who: "cccc", versions: three, expected: .version(carolCopy, by: carol)),
        // Refused: no such author, ambiguous remote, no local version.
        Row(who: "carol", versions: two, expected: nil),
        Row(who: "remote", versions: three, expected: nil),
        Row(who: "local", versions: [file, carolCopy], expected: nil),
        Row(who: "alcie", versions: two, expected: nil),
    ]

    @Test(arguments: rows) func picks(_ row: Row) {
        do throws(EngineError) {
            let pick = try ConflictChoice.pick(row.who, versions: row.versions, authors: [Self.alice, Self.bob, Self.carol], file: "/d/notes.txt")
            #expect(pick == row.expected)
        } catch {
            #expect(row.expected == nil, "\(error)")
            #expect(error.description.contains("both") && error.description.contains("keep one of"), "\(error)")
        }
    }

    @Test func theNewestOfAnAuthorsVersionsIsKept() throws {
        let older = ConflictChoice.Version(path: "notes.sync-conflict-20231114-221300-BBBBBBB.txt", author: "BBBBBBB", mtimeNs: 500, atPath: false)
        let pick = try ConflictChoice.pick("bob", versions: [Self.file, older, Self.bobCopy], authors: [Self.alice, Self.bob], file: "/d/notes.txt")
        #expect(pick == .version(Self.bobCopy, by: Self.bob))
    }

    @Test func aRefusalNamesTheChoices() {
        #expect(throws: EngineError.self) {
            try ConflictChoice.pick("alcie", versions: Self.two, authors: [Self.alice, Self.bob], file: "/d/notes.txt")
        }
        do throws(EngineError) {
            _ = try ConflictChoice.pick("alcie", versions: Self.two, authors: [Self.alice, Self.bob], file: "/d/notes.txt")
        } catch {
            #expect(error.description.contains("alice (AAAAAAA), bob (BBBBBBB), both"), "\(error)")
            #expect(error.description.contains("did you mean alice?"), "\(error)")
        }
    }
}
