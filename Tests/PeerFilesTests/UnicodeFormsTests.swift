import Foundation
@testable import PeerFiles
import Testing
import TestKit

/// UnicodeForms gives the normal forms without ICU (issue 42.6): Foundation's for every
/// assigned scalar of the Unicode version its table comes from, and UAX #15's (Python's
/// unicodedata) for sequences where order, blocking and Hangul matter.
@Suite struct UnicodeFormsTests {
    /// Foundation's four forms of `text`, then ours.
    static func forms(_ text: String) -> (foundation: [String], ours: [String]) {
        ([text.precomposedStringWithCanonicalMapping, text.decomposedStringWithCanonicalMapping,
          text.precomposedStringWithCompatibilityMapping, text.decomposedStringWithCompatibilityMapping],
         [UnicodeForms.nfc(text), UnicodeForms.nfd(text), UnicodeForms.nfkc(text), UnicodeForms.nfkd(text)])
    }

    static func bytes(_ forms: [String]) -> [[UInt8]] { forms.map { Array($0.utf8) } }

    @Test func everyScalarHasFoundationsFormsInEachOfTheFour() {
        let version = UnicodeForms.unicodeVersion.split(separator: ".").compactMap { Int($0) }
        var differing: [String] = []
        var checked = 0
        for value in UInt32(0x80)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value), let age = scalar.properties.age,
                  (age.major, age.minor) <= (version[0], version[1]) else { continue }
            let (foundation, ours) = Self.forms(String(Character(scalar)))
            checked += 1
            if Self.bytes(foundation) != Self.bytes(ours), differing.count < 20 { differing.append(String(value, radix: 16)) }
        }
        #expect(checked > 140_000)
        #expect(differing.isEmpty, "forms differ from Foundation's for U+\(differing)")
    }

    /// Python's `unicodedata.normalize` (the reference this file's tables come from, of the
    /// same Unicode version) for each of `texts`, as the four forms. Foundation on Linux is not
    /// the judge for sequences: it leaves "\u{AC00}\u{11A8}" (LV + T) apart, does not compose
    /// after a compatibility decomposition ("ﾊﾟ" stays two in NFKC) and keeps U+0308 before the
    /// U+0F71 U+0F72 of a decomposed U+0F73, against UAX #15 (its scalars agree, above).
    static func reference(_ texts: [String]) throws -> [[String]] {
        let program = """
            import sys, unicodedata
            for line in sys.stdin.read().splitlines():
                text = "".join(chr(int(h, 16)) for h in line.split())
                print("|".join(" ".join("%X" % ord(c) for c in unicodedata.normalize(f, text)) for f in ("NFC", "NFD", "NFKC", "NFKD")))
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", program]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let lines = texts.map { $0.unicodeScalars.map { String($0.value, radix: 16) }.joined(separator: " ") }.joined(separator: "\n") + "\n"
        input.fileHandleForWriting.write(Data(lines.utf8))
        try input.fileHandleForWriting.close()
        let answer = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return answer.split(separator: "\n", omittingEmptySubsequences: false).prefix(texts.count).map { line in
            line.split(separator: "|", omittingEmptySubsequences: false).map { form in
                String(String.UnicodeScalarView(form.split(separator: " ").map { Unicode.Scalar(UInt32($0, radix: 16)!)! }))
            }
        }
    }

    static func expectReferenceForms(_ texts: [String]) throws {
        let expected = try reference(texts)
        try #require(expected.count == texts.count)
        for (text, forms) in zip(texts, expected) {
            let ours = [UnicodeForms.nfc(text), UnicodeForms.nfd(text), UnicodeForms.nfkc(text), UnicodeForms.nfkd(text)]
            #expect(bytes(ours) == bytes(forms), "\(text.unicodeScalars.map { String($0.value, radix: 16) })")
        }
    }

    @Test func sequencesWhereOrderBlockingAndHangulMatterHaveTheReferenceForms() throws {
        try Self.expectReferenceForms([
            "cafe\u{301}", "caf\u{E9}", "a\u{301}\u{323}", "a\u{323}\u{301}", "a\u{301}\u{301}", "\u{C7}\u{301}", "C\u{327}\u{301}",
            "\u{1100}\u{1161}\u{11A8}", "\u{AC00}\u{11A8}", "\u{1100}\u{1161}x", "\u{FB01}le", "\u{FF2C}\u{FF41}\u{FF50}", "\u{212B}",
            "\u{212A}elvin", "\u{0B47}\u{0B3E}", "\u{1E9B}\u{323}", "e\u{304}\u{301}", "\u{2126}\u{345}\u{313}", "x\u{308}\u{0F73}",
            "\u{FF8A}\u{FF9F}\u{FF7F}\u{FF7A}\u{FF9D}", "\u{3300}", "\u{1D15E}\u{1D165}", "n\u{303}o\u{308}\u{304}", "",
        ])
    }

    /// Random strings of starters, combining marks of several classes and Hangul jamo.
    @Test func randomMixturesHaveTheReferenceForms() throws {
        let pool: [Unicode.Scalar] = ["a", "e", "o", "A", "\u{E9}", "\u{C5}", "\u{300}", "\u{301}", "\u{308}", "\u{323}", "\u{327}",
                                      "\u{345}", "\u{5B0}", "\u{1100}", "\u{1161}", "\u{11A8}", "\u{AC00}", "\u{212B}", "\u{FB01}",
                                      "\u{3099}", "\u{304B}", "\u{FF76}", "\u{FF9E}", "\u{1E0B}", "\u{F73}", "\u{1D165}"]
        var generator = SplitMix64(seed: 42)
        let texts = (0..<3_000).map { _ in
            String(String.UnicodeScalarView((0..<Int.random(in: 1...8, using: &generator)).map { _ in pool.randomElement(using: &generator)! }))
        }
        try Self.expectReferenceForms(texts)
    }
}
