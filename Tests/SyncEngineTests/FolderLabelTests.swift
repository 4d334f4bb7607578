import PeerFiles
@testable import SyncEngine
import TestKit
import Testing

/// A peer's folder label becomes one safe name: never a path, never hidden, never a
/// terminal escape, never too long.
@Suite struct FolderLabelTests {
    @Test(arguments: [
        ("Holiday photos", "Holiday photos"),
        ("Holiday photos/../../.ssh", "Holiday photos_.._.._.ssh"),
        ("../../../../x", "_.._.._.._x"),
        ("/etc", "_etc"),
        ("a\\b", "a_b"),
        (".ssh", "ssh"),
        ("...  .config  ", "config"),
        (".\u{301}hidden", "\u{301}hidden"),
        ("tab\there", "tab_here"),
        ("line\nbreak", "line_break"),
        ("esc\u{1B}[31mred", "esc_[31mred"),
        ("nul\u{0}byte", "nul_byte"),
        ("c1\u{9B}31m", "c1_31m"),
        ("right\u{202E}gpj.exe", "right_gpj.exe"),
        ("zero\u{200B}width", "zero_width"),
        ("para\u{2029}sep", "para_sep"),
        ("Fotos 2024 ☀️ été", "Fotos 2024 ☀️ été"),
    ])
    func labelsBecomeOneSafeName(_ label: String, _ expected: String) {
        #expect(FolderLabel.safeName(label, fallback: "abcde-fghij") == expected)
    }

    @Test(arguments: ["", ".", "..", "...", " ", " . ", "\u{2003}.\u{3000}"])
    func nothingLeftGivesTheFallback(_ label: String) {
        #expect(FolderLabel.safeName(label, fallback: "abcde-fghij") == "abcde-fghij")
        #expect(FolderLabel.safeName(label, fallback: "../..") == "_..")
        #expect(FolderLabel.safeName(label, fallback: "..") == FolderLabel.lastResort)
    }

    @Test func longLabelsAreCutOnACharacterBoundary() {
        for unit in ["x", "é", "日", "😀", "e\u{301}"] {
            let name = FolderLabel.safeName(String(repeating: unit, count: 300), fallback: "id")
            #expect(name.utf8.count <= FolderLabel.maxBytes)
            #expect(name.utf8.count > FolderLabel.maxBytes - unit.utf8.count)
            #expect(name == String(repeating: unit, count: name.count), "cut inside a character: \(unit)")
        }
    }

    /// Whatever the input, the result is one component the file system takes as a plain
    /// name: it passes PeerFiles' SafePath rules, is not hidden and carries no control,
    /// format or separator character.
    @Test func anyLabelGivesASafeComponent() throws {
        let alphabet: [Unicode.Scalar] = ["/", ".", ".", "\\", " ", "a", "é", "\u{0}", "\u{1B}", "\u{7F}", "\u{85}", "\u{9B}",
                                          "\u{202E}", "\u{2066}", "\u{FEFF}", "\u{2028}", "日", "😀", "\u{301}"]
        var generator = SplitMix64(seed: 10)
        for _ in 0..<2_000 {
            var scalars = String.UnicodeScalarView()
            for _ in 0..<Int(generator.next() % 300) {
                scalars.append(alphabet[Int(generator.next() % UInt64(alphabet.count))])
            }
            let label = String(scalars)
            let name = FolderLabel.safeName(label, fallback: "abcde-fghij")
            #expect(throws: Never.self) { try SafePath.validateName(name) }
            #expect(name.utf8.first != UInt8(ascii: "."), "hidden: \(name.debugDescription)")
            #expect(name.utf8.count <= FolderLabel.maxBytes)
            #expect(!name.unicodeScalars.contains { ["\u{85}", "\u{9B}", "\u{202E}", "\u{2066}", "\u{FEFF}", "\u{2028}"].contains($0) })
            #expect(FolderLabel.isSafe(name), "not stable: \(name.debugDescription)")
        }
    }
}
