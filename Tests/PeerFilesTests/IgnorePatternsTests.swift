@testable import PeerFiles
import Testing

/// One row: the ignore file, a path, whether it is a directory, and the expected answer.
struct IgnoreCase: CustomTestStringConvertible, Sendable {
    let patterns: String
    let path: String
    let isDirectory: Bool
    let ignored: Bool
    init(_ patterns: String, _ path: String, dir: Bool = false, _ ignored: Bool) {
        self.patterns = patterns
        self.path = path
        self.isDirectory = dir
        self.ignored = ignored
    }
    var testDescription: String { "\(patterns.debugDescription) \(path)\(isDirectory ? "/" : "") → \(ignored)" }
}

let ignoreTable: [IgnoreCase] = [
    // Plain names match at any depth.
    IgnoreCase("foo.txt", "foo.txt", true),
    IgnoreCase("foo.txt", "a/b/foo.txt", true),
    IgnoreCase("foo.txt", "a/foo.txt.bak", false),
    IgnoreCase("foo.txt", "xfoo.txt", false),
    // Star: any run within one component.
    IgnoreCase("*.log", "x.log", true),
    IgnoreCase("*.log", "deep/down/x.log", true),
    IgnoreCase("*.log", ".log", true),
    IgnoreCase("*.log", "x.log.gz", false),
    IgnoreCase("a*c", "abbbc", true),
    IgnoreCase("a*c", "ac", true),
    IgnoreCase("a*c", "abcd", false),
    IgnoreCase("docs/*.md", "docs/a.md", true),
    IgnoreCase("docs/*.md", "docs/sub/a.md", false),       // * never crosses "/"
    IgnoreCase("*a*b*c*", "xxaxxbxxcxx", true),
    IgnoreCase("*a*b*c*", "xxaxxcxxbxx", false),
    // Question mark: exactly one character (a Unicode scalar).
    IgnoreCase("file?.txt", "file1.txt", true),
    IgnoreCase("file?.txt", "file.txt", false),
    IgnoreCase("file?.txt", "file12.txt", false),
    IgnoreCase("file?.txt", "fileé.txt", true),
    // Character classes.
    IgnoreCase("[abc].txt", "b.txt", true),
    IgnoreCase("[abc].txt", "d.txt", false),
    IgnoreCase("img[0-9].png", "img7.png", true),
    IgnoreCase("img[0-9].png", "imgx.png", false),
    IgnoreCase("[!a-c]*", "dog", true),
    IgnoreCase("[!a-c]*", "cat", false),
    IgnoreCase("[^a-c]*", "cat", false),
    IgnoreCase("x[]]y", "x]y", true),
    IgnoreCase("[é-ë].txt", "ê.txt", true),
    IgnoreCase("[abc", "[abc", true),                      // unclosed "[" is literal
    IgnoreCase("[abc", "a", false),
    // Comments, blank lines, escapes.
    IgnoreCase("# comment\n\n*.tmp\n", "a.tmp", true),
    IgnoreCase("# *.tmp", "a.tmp", false),
    IgnoreCase("\\#hash", "#hash", true),
    IgnoreCase("\\!bang", "!bang", true),
    IgnoreCase("*.tmp   ", "a.tmp", true),                 // trailing spaces dropped
    IgnoreCase("a\\*b", "a*b", true),
    IgnoreCase("a\\*b", "axb", false),
    IgnoreCase("*.tmp\r\n*.bak\r\n", "x.bak", true),      // CRLF files
    // Negation: the last matching rule wins.
    IgnoreCase("*.log\n!keep.log", "keep.log", false),
    IgnoreCase("*.log\n!keep.log", "other.log", true),
    IgnoreCase("!keep.log\n*.log", "keep.log", true),
    IgnoreCase("*\n!*.c", "main.c", false),
    IgnoreCase("*\n!*.c", "main.h", true),
    IgnoreCase("*.log\n!keep.log\nkeep.log", "keep.log", true),
    // An ignored directory ignores everything below it; a "!" cannot re-include inside it.
    IgnoreCase("build", "build/x/y.o", true),
    IgnoreCase("build\n!build/keep.txt", "build/keep.txt", true),
    IgnoreCase("node_modules", "web/node_modules/pkg/index.js", true),
    // Anchoring: a leading "/" means the folder root, a "/" in the middle too.
    IgnoreCase("/build", "build", dir: true, true),
    IgnoreCase("/build", "src/build", dir: true, false),
    IgnoreCase("/todo.txt", "todo.txt", true),
    IgnoreCase("/todo.txt", "a/todo.txt", false),
    IgnoreCase("src/gen", "src/gen", dir: true, true),
    IgnoreCase("src/gen", "lib/src/gen", dir: true, false),
    // "**": any number of directories.
    IgnoreCase("**/cache", "cache", dir: true, true),
    IgnoreCase("**/cache", "a/b/cache", dir: true, true),
    IgnoreCase("a/**/b", "a/b", true),
    IgnoreCase("a/**/b", "a/x/y/b", true),
    IgnoreCase("a/**/b", "a/x/y/c", false),
    IgnoreCase("logs/**", "logs/2024/x.txt", true),
    IgnoreCase("logs/**", "logs", dir: true, false),       // the directory itself stays
    IgnoreCase("**/*.bak", "deep/er/x.bak", true),
    IgnoreCase("**", "anything/at/all", true),
    IgnoreCase("a/**/**/b", "a/q/b", true),
    // Trailing "/": directories only.
    IgnoreCase("cache/", "cache", dir: true, true),
    IgnoreCase("cache/", "cache", dir: false, false),
    IgnoreCase("cache/", "x/cache/file", true),            // below an ignored directory
    IgnoreCase("cache/", "x/cache", dir: false, false),
    IgnoreCase("/out/", "out/a.txt", true),
    // Built-ins: always ignored, the ignore file at the root included (never synced); one
    // below the root is an ordinary file.
    IgnoreCase("", ".syncpeer-partial", dir: true, true),
    IgnoreCase("", "sub/.syncpeer-partial/t.part", true),
    IgnoreCase("", "report.pdf.syncpeer-tmp", true),
    IgnoreCase("!*.syncpeer-tmp", "x.syncpeer-tmp", true),
    IgnoreCase("", ".syncpeerignore", true),
    IgnoreCase("!.syncpeerignore", ".syncpeerignore", true),
    IgnoreCase("", "sub/.syncpeerignore", false),
    IgnoreCase("", "report.pdf", false),
    IgnoreCase(".syncpeerignore", ".syncpeerignore", true),
    // Case-sensitive, no normalization.
    IgnoreCase("*.JPG", "a.jpg", false),
    IgnoreCase("*.JPG", "a.JPG", true),
]

@Suite struct IgnorePatternsTests {
    @Test(arguments: ignoreTable)
    func table(_ row: IgnoreCase) {
        let patterns = IgnorePatterns(row.patterns)
        #expect(patterns.isIgnored(row.path, isDirectory: row.isDirectory) == row.ignored)
    }

    @Test func tableIsLarge() {
        #expect(ignoreTable.count >= 40)
    }

    @Test func commentsAndBlankLinesAreNotRules() {
        let patterns = IgnorePatterns("# a comment\n\n   \n*.o\n#another\n!keep.o\n")
        #expect(patterns.count == 2)   // "*.o" and "!keep.o"; a line of spaces is blank
    }

    @Test func loadReadsTheFileAtTheRoot() throws {
        try withTemporaryDirectory { dir in
            let root = try DirectoryHandle(path: dir)
            #expect(try IgnorePatterns.load(from: root).count == 0)
            try writeFile(dir + "/.syncpeerignore", Array("*.o\n/build/\n".utf8))
            let patterns = try IgnorePatterns.load(from: root)
            #expect(patterns.count == 2)
            #expect(patterns.isIgnored("x/y.o", isDirectory: false))
            #expect(patterns.isIgnored("build", isDirectory: true))
        }
    }
}
