import PeerFiles
import Testing

/// 2026-11-29 15:30:00 UTC.
let conflictTime: Int64 = 1_795_966_200

@Suite struct ConflictNameTests {
    static let table: [(String, String)] = [
        ("dir/report.pdf", "dir/report.sync-conflict-20261129-153000-ABCDEFG.pdf"),
        ("report.pdf", "report.sync-conflict-20261129-153000-ABCDEFG.pdf"),
        ("Makefile", "Makefile.sync-conflict-20261129-153000-ABCDEFG"),
        (".bashrc", ".bashrc.sync-conflict-20261129-153000-ABCDEFG"),
        ("home/.config.bak", "home/.config.sync-conflict-20261129-153000-ABCDEFG.bak"),
        ("archive.tar.gz", "archive.tar.sync-conflict-20261129-153000-ABCDEFG.gz"),
        ("notes.", "notes..sync-conflict-20261129-153000-ABCDEFG"),
        ("a/b.c/readme", "a/b.c/readme.sync-conflict-20261129-153000-ABCDEFG"),
        ("été/résumé.txt", "été/résumé.sync-conflict-20261129-153000-ABCDEFG.txt"),
    ]

    @Test(arguments: table)
    func names(_ row: (String, String)) {
        let made = ConflictName.make(for: row.0, at: conflictTime, device: "ABCDEFG")
        #expect(made == row.1)
        #expect(ConflictName.isConflictName(made))
        #expect(!ConflictName.isConflictName(row.0))
        let parsed = ConflictName.parse(made)
        #expect(parsed?.original == row.0)
        #expect(parsed?.time == "20261129-153000")
        #expect(parsed?.device == "ABCDEFG")
    }

    /// 1,000,000,000 is 2001-09-09 01:46:40 UTC.
    @Test func epochAndPadding() {
        #expect(ConflictName.make(for: "x", at: 0, device: "D") == "x.sync-conflict-19700101-000000-D")
        #expect(ConflictName.make(for: "x", at: 1_000_000_000 + 3_601 + 61, device: "D") == "x.sync-conflict-20010909-024742-D")
    }

    @Test func notConflictNames() {
        for name in ["report.pdf", "a.sync-conflict-.pdf", "a.sync-conflict-2026112-153000-AB.pdf",
                     "a.sync-conflict-20261129-153000-.pdf", "a.sync-conflict-20261129-153000-AB?.pdf",
                     "a.sync-conflict-20261129x153000-AB", ".sync-conflict-20261129-153000-AB",
                     "sync-conflict-20261129-153000-AB"] {
            #expect(!ConflictName.isConflictName(name), "\(name)")
        }
    }

    @Test func conflictOfAConflict() {
        let once = ConflictName.make(for: "a.txt", at: conflictTime, device: "AAA")
        let twice = ConflictName.make(for: once, at: conflictTime + 1, device: "BBB")
        #expect(twice == "a.sync-conflict-20261129-153000-AAA.sync-conflict-20261129-153001-BBB.txt")
        #expect(ConflictName.parse(twice)?.original == once)
    }

    @Test func longNamesAreShortened() {
        let long = String(repeating: "é", count: 120) + ".txt"   // 244 bytes
        let made = ConflictName.make(for: "d/" + long, at: conflictTime, device: "ABCDEFG")
        let name = made.split(separator: "/").last!
        #expect(name.utf8.count <= 255)
        #expect(name.hasSuffix(".sync-conflict-20261129-153000-ABCDEFG.txt"))
        #expect(ConflictName.isConflictName(made))
    }
}
