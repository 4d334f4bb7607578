@testable import PeerFiles
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

    /// Names are bytes: a copy of the NFC "café.txt" is not a copy of the NFD one beside it
    /// (Swift's `==` says the two names are equal), and the other way round.
    @Test func aCopyBelongsToItsOriginalByBytes() {
        let nfc = "caf\u{E9}.txt", nfd = "cafe\u{301}.txt"
        let copyOfNFC = ConflictName.make(for: nfc, at: conflictTime, device: "AAA")
        let copyOfNFD = ConflictName.make(for: nfd, at: conflictTime, device: "AAA")
        #expect(ConflictName.isCopy(copyOfNFC, of: nfc) && ConflictName.isCopy(copyOfNFD, of: nfd))
        #expect(!ConflictName.isCopy(copyOfNFC, of: nfd) && !ConflictName.isCopy(copyOfNFD, of: nfc))
    }

    /// A tag keeps the format parseable: same original, time and device; the copy is still
    /// a copy of its original, and names without a tag still parse.
    @Test func taggedNames() {
        let made = ConflictName.make(for: "dir/report.pdf", at: conflictTime, device: "ABCDEFG", tag: "0a1b2c3d")
        #expect(made == "dir/report.sync-conflict-20261129-153000-ABCDEFG-0a1b2c3d.pdf")
        let parsed = ConflictName.parse(made)
        #expect(parsed?.original == "dir/report.pdf" && parsed?.time == "20261129-153000" && parsed?.device == "ABCDEFG")
        #expect(ConflictName.isCopy(made, of: "dir/report.pdf"))
        #expect(ConflictName.make(for: "a", at: 0, device: "D", tag: "../x.y") == "a.sync-conflict-19700101-000000-D-xy")
        for bad in ["a.sync-conflict-20261129-153000-AB-.pdf", "a.sync-conflict-20261129-153000-AB-c-d.pdf",
                    "a.sync-conflict-20261129-153000--cd.pdf"] {
            #expect(!ConflictName.isConflictName(bad), "\(bad)")
        }
    }

    /// When a copy's name is taken, its alternatives are other names of the same original,
    /// all different, the same for the same name and attempt, and bounded in number.
    @Test func alternativesOfATakenName() {
        let long = "d/" + String(repeating: "é", count: 120) + ".txt"
        for original in ["d/report.pdf", long] {
            let planned = ConflictName.make(for: original, at: conflictTime, device: "ABCDEFG", tag: ConflictName.tag(of: Array("v".utf8)))
            let others = (1...ConflictName.maxAlternatives).compactMap { ConflictName.alternative(planned, of: original, attempt: $0) }
            #expect(others.count == ConflictName.maxAlternatives)
            #expect(Set(others + [planned]).count == others.count + 1)
            #expect(others.allSatisfy { ConflictName.isCopy($0, of: original) && $0.split(separator: "/").last!.utf8.count <= 255 })
            #expect(ConflictName.alternative(planned, of: original, attempt: 1) == others[0])
            #expect(ConflictName.alternative(planned, of: original, attempt: ConflictName.maxAlternatives + 1) == nil)
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

/// Names are bytes with a limit (NAME_MAX, 255): conflict copies and numbered names of any
/// name of 1–255 bytes fit, end on a character boundary, parse back to their original, and
/// differ for names that differ only at their end.
@Suite struct NameLimitTests {
    /// One character of each UTF-8 length, and an extension or none.
    static let alphabets: [(character: String, ext: String)] = [
        ("a", ""), ("a", ".txt"), ("é", ""), ("é", ".pdf"), ("漢", ""), ("漢", ".文書"), ("😀", ""), ("😀", ".jpeg"),
    ]

    /// A name of at most `bytes` bytes: the character repeated, then the extension, the
    /// last character before the extension replaced by `last` (for pairs).
    static func name(bytes: Int, _ alphabet: (character: String, ext: String), last: String = "1") -> String? {
        let room = bytes - alphabet.ext.utf8.count - last.utf8.count
        guard room >= 0 else { return nil }
        let stem = String(repeating: alphabet.character, count: room / alphabet.character.utf8.count) + last
        return stem + alphabet.ext
    }

    static var rows: [(Int, Int)] { (0..<alphabets.count).flatMap { a in (1...255).map { (a, $0) } } }

    @Test(arguments: rows)
    func conflictCopiesFitAndParse(_ row: (Int, Int)) throws {
        let alphabet = Self.alphabets[row.0]
        guard let a = Self.name(bytes: row.1, alphabet, last: "1"), let b = Self.name(bytes: row.1, alphabet, last: "2") else { return }
        for directory in ["", "dir/sub/"] {
            let copyA = ConflictName.make(for: directory + a, at: conflictTime, device: "ABCDEFG")
            let copyB = ConflictName.make(for: directory + b, at: conflictTime, device: "ABCDEFG")
            let nameA = String(copyA.dropFirst(directory.count))
            #expect(nameA.utf8.count <= 255, "\(a.utf8.count) bytes → \(nameA.utf8.count)")
            #expect(String(validating: Array(nameA.utf8), as: UTF8.self) != nil)
            #expect((try? SafePath.validateName(nameA)) != nil, "\(nameA)")
            #expect(copyA.hasPrefix(directory))
            #expect(copyA != copyB, "names that differ only at their end get different copies")
            #expect(ConflictName.isConflictName(copyA))
            #expect(ConflictName.isCopy(copyA, of: directory + a))
            #expect(!ConflictName.isCopy(copyA, of: directory + b))
            #expect(ConflictName.parse(copyA)?.time == "20261129-153000")
            #expect(ConflictName.parse(copyA)?.device == "ABCDEFG")
            if let prefix = ConflictName.shortenedOriginalPrefix(of: copyA) {
                #expect((directory + a).hasPrefix(prefix), "the original starts with the kept part")
            } else {
                #expect(ConflictName.parse(copyA)?.original == directory + a, "an unshortened copy names its original")
            }
            // The extension stays when it fits.
            if !alphabet.ext.isEmpty { #expect(nameA.hasSuffix("-ABCDEFG" + alphabet.ext)) }
        }
    }

    @Test(arguments: rows)
    func numberedNamesFit(_ row: (Int, Int)) throws {
        guard let a = Self.name(bytes: row.1, Self.alphabets[row.0]) else { return }
        let numbered = SafePath.numberedName(a, 12)
        #expect(numbered.utf8.count <= 255)
        #expect(numbered.contains(" (12)"))
        #expect((try? SafePath.validateName(numbered)) != nil)
    }

    @Test func aPeersDeviceTextNeverShapesThePath() {
        for device in ["../../x", "a/b.c", ".", "", "日本", "AB.CD/EF"] {
            let copy = ConflictName.make(for: "d/report.pdf", at: conflictTime, device: device)
            #expect(copy.hasPrefix("d/report.sync-conflict-20261129-153000-") && copy.hasSuffix(".pdf"), "\(copy)")
            #expect(copy.split(separator: "/").count == 2, "\(copy)")
            #expect(ConflictName.isCopy(copy, of: "d/report.pdf"), "\(copy)")
        }
    }

    @Test func anExtensionTooLongToKeepIsPartOfTheStem() {
        let name = "a." + String(repeating: "x", count: 240)
        let copy = ConflictName.make(for: name, at: conflictTime, device: "ABCDEFG")
        #expect(copy.utf8.count <= 255)
        #expect(ConflictName.isCopy(copy, of: name))
    }

    @Test func cutsNeverSplitACharacter() {
        let bytes = Array("a漢😀é".utf8)[...]
        for limit in 0...bytes.count {
            let kept = ConflictName.utf8Prefix(bytes, maxBytes: limit)
            #expect(kept.count <= limit)
            #expect(String(validating: Array(kept), as: UTF8.self) != nil, "\(limit)")
        }
    }
}

/// A conflict copy's time as JSON shows it (epoch seconds from the name's UTC stamp).
struct ConflictStampTests {
    @Test func aStampReadsBackAsTheSecondsItWasMadeFrom() {
        for seconds: Int64 in [0, 1_700_000_000, 1_764_576_000] {
            #expect(ConflictName.unixSeconds(ofStamp: ConflictName.timestamp(seconds)) == seconds)
        }
        #expect(ConflictName.unixSeconds(ofStamp: "2026120-081500") == nil)
        #expect(ConflictName.unixSeconds(ofStamp: "20261201x081500") == nil)
    }
}
