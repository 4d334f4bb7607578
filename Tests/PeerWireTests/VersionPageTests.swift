import Testing
@testable import PeerWire

/// Issue 41: a version page from a peer is hostile input: counts and lengths are checked
/// before anything is allocated.
struct VersionPageTests {
    static let entry = VersionEntry(id: 9, path: "docs/a.txt", keptAt: 1_764_950_400_000, size: 1_000, mtimeNs: -5, modifiedBy: "ABCDEFG",
                                    reason: "peer-delete", held: true, rootHash: [UInt8](repeating: 7, count: 32), manifest: [1, 2, 3])

    @Test func aPageReadsBackAsWritten() throws {
        let page = VersionPage(entries: [Self.entry, Self.entry], more: true)
        try page.validate()
        #expect(try VersionPage.decode(page.encoded()) == page)
    }

    @Test func countsAndLengthsBeyondTheBoundsAreRefused() {
        // A count above the page bound, and a count the body cannot hold.
        #expect(throws: WireError.self) { try VersionPage.decode([0, 0x03, 0xE9]) }
        #expect(throws: WireError.self) { try VersionPage.decode([0, 0, 2] + Array(VersionPage(entries: [Self.entry], more: false).encoded().dropFirst(3))) }
        // A path that leaves nothing printable (a control character), an unsafe author.
        var bad = Self.entry
        bad.path = "a\u{1B}[2J"
        #expect(throws: WireError.self) { try VersionPage.decode(VersionPage(entries: [bad], more: false).encoded()) }
        #expect(throws: WireError.self) { try VersionPage(entries: Array(repeating: Self.entry, count: 1_001), more: false).validate() }
        // Trailing bytes.
        #expect(throws: WireError.self) { try VersionPage.decode(VersionPage(entries: [], more: false).encoded() + [0]) }
    }
}
