import Testing
@testable import SyncEngine
@testable import SyncpeerCLI

/// Names are shown to people with their invisible and reordering characters escaped.
@Suite struct NameDisplayTests {
    @Test(arguments: [
        ("report\u{202E}fdp.exe", "report\\u{202E}fdp.exe"),
        ("\u{202A}\u{202B}\u{202C}\u{202D}", "\\u{202A}\\u{202B}\\u{202C}\\u{202D}"),
        ("a\u{2066}b\u{2067}c\u{2068}d\u{2069}", "a\\u{2066}b\\u{2067}c\\u{2068}d\\u{2069}"),
        ("\u{200E}x\u{200F}y\u{061C}", "\\u{200E}x\\u{200F}y\\u{061C}"),
        ("zero\u{200B}width", "zero\\u{200B}width"),
        ("bell\u{7}", "bell\\u{0007}"),
        ("line\u{2028}sep", "line\\u{2028}sep"),
        ("café and cafe\u{301}, 漢字, 😀", "café and cafe\u{301}, 漢字, 😀"),
    ])
    func hiddenCharactersAreEscaped(name: String, shown: String) {
        #expect(Array(NameDisplay.escaped(name).utf8) == Array(shown.utf8))
    }

    @Test func humanLinesAreEscapedLineByLine() {
        let output = CapturedOutput()
        output.line("first \u{202E}gpj.exe\nsecond")
        #expect(output.standardOutput == "first \\u{202E}gpj.exe\nsecond\n")
    }

    @Test func jsonKeepsTheRealName() {
        let output = CapturedOutput()
        output.json(["name": "a\u{202E}b"])
        #expect(output.standardOutput == "{\"name\":\"a\u{202E}b\"}\n")
    }
}
