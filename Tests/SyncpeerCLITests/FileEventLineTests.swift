import Testing
@testable import SyncEngine
@testable import SyncpeerCLI
import PeerNet

/// `syncpeer daemon --json` writes `file` events by hand (`FileEventLine`): a script reading
/// them must get exactly the line the JSON encoder writes for every other event.
@Suite struct FileEventLineTests {
    static let awkward = "dir/“q” \"quoted\" back\\slash\ttab\nnew\r\u{8}\u{C}\u{0}\u{1F}\u{7F} é 漢 😀 \u{202E}/end"

    static let changes: [NodeEvent.FileChange] = [
        .init(folder: "abcde-fghij", name: "Home", path: "a/b.txt", state: .syncing, bytes: 4096, total: 8192, copy: nil,
              reason: nil, time: 1_733_486_400_123),
        .init(folder: "abcde-fghij", name: "Home", path: "a/b.txt", state: .pulled, bytes: 0, total: nil, copy: nil,
              reason: nil, time: 0),
        .init(folder: "f", name: "", path: awkward, state: .failed, bytes: nil, total: nil, copy: nil,
              reason: "cannot write: \"disk\" full; tried again at 12:00", time: -1),
        .init(folder: "f", name: awkward, path: "x", state: .conflict, bytes: Int64.max, total: Int64.min,
              copy: "x.sync-conflict-20261206-120000-ABCDEFG", reason: nil, time: 42),
    ]

    @Test(arguments: changes)
    func lineIsWhatTheEncoderWrites(change: NodeEvent.FileChange) throws {
        let event = NodeEvent.file(change)
        let line = try #require(FileEventLine.line(event))
        #expect(Array(line.utf8) == Array(try #require(CapturedOutput.jsonLine(event)).utf8))
    }

    @Test func everyControlCharacterIsEscapedAsTheEncoderDoes() throws {
        for byte in UInt8(0)...UInt8(0x7F) {
            let text = "a" + String(UnicodeScalar(byte)) + "b"
            var out: [UInt8] = []
            FileEventLine.escaped(text, &out)
            let encoded = try #require(CapturedOutput.jsonLine([text]))
            // ["…"] and a newline around the string.
            #expect(out == Array(encoded.utf8.dropFirst().dropLast(2)), "byte \(byte)")
        }
    }

    @Test func otherEventsAreLeftToTheEncoder() {
        #expect(FileEventLine.line(.folder(.init(folder: "f", peer: nil, name: "n", state: .idle, path: "/p", reason: nil, time: 1))) == nil)
    }

    @Test func theDaemonsOutputStreamsFileEventsAsLines() throws {
        // What `daemon --json` writes for a file event: one line, parsed back to the same fields.
        let output = CapturedOutput()
        let change = Self.changes[0]
        if let line = FileEventLine.line(.file(change)) { output.out(line) }
        let parsed = try #require(JSONValue.parse(String(output.standardOutput.dropLast())))
        #expect(parsed["event"]?.stringValue == "file")
        #expect(parsed["path"]?.stringValue == change.path)
        #expect(parsed["bytes"]?.intValue == 4096)
        #expect(output.standardOutput.hasSuffix("}\n"))
    }
}
