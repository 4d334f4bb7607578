import Foundation
@testable import PeerFiles
import Testing

/// The helpers that replace Foundation's in the binary (issue 42.6) give Foundation's results.
@Suite struct PlainTextTests {
    static let paths = ["/a/b", "/a/b/", "/a", "/", "", "a", "a/b", "a//b", "/tmp/x.txt", "dir/.x", "a.", ".bashrc",
                        "a.b.c", "a..b", "x.tar.gz", "caf\u{E9}.txt", "/a/b.d/c", "relative/dir/", "a.txt/", "a.txt//", "a//b.c"]

    @Test(arguments: paths)
    func pathHelpersAnswerAsNSString(_ path: String) {
        let ns = path as NSString
        #expect(PathName.lastComponent(path) == ns.lastPathComponent)
        #expect(PathName.pathExtension(path) == ns.pathExtension)
        #expect(PathName.deletingPathExtension(path) == ns.deletingPathExtension)
        if path.contains("/") || path.isEmpty {  // Foundation traps on "a" (a name without a slash)
            #expect(PathName.deletingLastComponent(path) == ns.deletingLastPathComponent)
        }
        for component in ["b", "x.txt", ".hidden"] {
            #expect(PathName.appending(path, component) == ns.appendingPathComponent(component))
        }
    }

    @Test func trimmingTakesFoundationsWhiteSpace() {
        for text in ["  a b  ", "\t x \u{A0}\u{3000}", "\n x \n", " \r\n\u{85}\u{2028}y\u{2029} ", "", "   ", "x", "\u{200B}x\u{200B}"] {
            #expect(text.trimmingWhitespace() == text.trimmingCharacters(in: .whitespaces), "\(Array(text.unicodeScalars))")
            #expect(text.trimmingWhitespaceAndNewlines() == text.trimmingCharacters(in: .whitespacesAndNewlines), "\(Array(text.unicodeScalars))")
        }
    }

    @Test func formatWritesWhatStringFormatWrites() {
        for value in [0.0, 0.05, 0.25, 1.25, 3.25, 999.95, 12345.678, -2.5] {
            #expect(PlainText.format(" in %.1f s", value) == String(format: " in %.1f s", value))
            #expect(PlainText.format("%.1f/%.1f ", value, value * 3) == String(format: "%.1f/%.1f ", value, value * 3))
        }
        for seconds in [0, 59, 61, 3_599, 3_661, 360_000] {
            #expect(PlainText.format("%d:%02d:%02d", seconds / 3600, seconds / 60 % 60, seconds % 60)
                == String(format: "%d:%02d:%02d", seconds / 3600, seconds / 60 % 60, seconds % 60))
        }
        let long = String(repeating: "x", count: 1_000)
        #expect(PlainText.format("%d \(long)", 7) == "7 \(long)")
    }

    @Test func aFileSystemErrorReadsAsTheSystemsMessage() {
        do {
            try FileManager.default.createDirectory(atPath: "/proc/no-such-process/x", withIntermediateDirectories: true)
            Issue.record("made a directory under /proc")
        } catch {
            #expect(PlainText.reason(error) == "No such file or directory")
        }
    }
}
