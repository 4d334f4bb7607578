import Foundation
import Testing
@testable import Wormhole

/// Zips from Python's zipfile (what Magic Wormhole sends folders in), made by
/// `Zips/make_zips.py`: good ones unpack exactly (deflate at levels 0, 1, 9 and stored, so
/// stored, fixed and dynamic blocks), hostile ones are refused and leave nothing.
@Suite(.serialized)
struct SafeUnzipperTests {
    static let made = zips(by: "make_zips.py")

    /// A new temporary folder with the zips `Zips/SCRIPT` writes into it.
    static func zips(by script: String) -> Result<URL, any Error> {
        Result {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("zips-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Zips/" + script).path
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = [path, dir.path]
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw WormholeError.transfer("\(script) failed") }
            return dir
        }
    }

    func unpack(_ name: String, maxTotal: Int64 = 1 << 30) throws -> (String, Result<Int, WormholeError>) {
        let dir = try Self.made.get()
        let destination = dir.appendingPathComponent("out-\(name)-\(UUID().uuidString)").path
        let result = Result { () throws(WormholeError) in try SafeUnzipper(zipPath: dir.appendingPathComponent(name).path, maxTotal: maxTotal).unpack(into: destination) }
        return (destination, result)
    }

    @Test(arguments: ["good-deflated-0.zip", "good-deflated-1.zip", "good-deflated-9.zip", "good-stored.zip"])
    func goodZipsUnpackExactly(_ name: String) throws {
        let (out, result) = try unpack(name)
        defer { try? FileManager.default.removeItem(atPath: out) }
        #expect(try result.get() == 4)
        let dir = try Self.made.get()
        #expect(FileManager.default.contents(atPath: out + "/top.txt") == Data("hello\n".utf8))
        #expect(FileManager.default.contents(atPath: out + "/sub/noise.bin") == FileManager.default.contents(atPath: dir.path + "/expected-noise.bin"))
        #expect(FileManager.default.contents(atPath: out + "/sub/deeper/text.txt") == FileManager.default.contents(atPath: dir.path + "/expected-text.bin"))
        #expect(FileManager.default.contents(atPath: out + "/sub/empty") == Data())
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: out + "/emptydir", isDirectory: &isDirectory) && isDirectory.boolValue)
        let mode = try FileManager.default.attributesOfItem(atPath: out + "/top.txt")[.posixPermissions] as? Int
        #expect(mode == 0o755, "the executable bit survives")
    }

    @Test(arguments: [("dotdot.zip", "unsafe name"), ("absolute.zip", "unsafe name"), ("inner-dotdot.zip", "unsafe name"),
                      ("symlink.zip", "link or special file"), ("duplicate.zip", "twice"), ("file-and-folder.zip", "both a file and a folder"),
                      ("bomb.zip", "more than the 1000 bytes it declares"), ("badcrc.zip", "CRC-32")])
    func hostileZipsAreRefusedAndLeaveNothing(_ name: String, _ reason: String) throws {
        let (out, result) = try unpack(name)
        #expect(throws: WormholeError.self) { try result.get() }
        if case let .failure(error) = result { #expect(error.description.contains(reason), "\(error)") }
        #expect(!FileManager.default.fileExists(atPath: out), "nothing left behind")
        let dir = try Self.made.get().path
        #expect(!FileManager.default.fileExists(atPath: dir + "/evil.txt"))
        #expect(!FileManager.default.fileExists(atPath: "/tmp/evil.txt"))
    }

    @Test func aZipLargerThanOfferedIsRefused() throws {
        let (out, result) = try unpack("good-deflated-9.zip", maxTotal: 1000)
        #expect(throws: WormholeError.protocolViolation("the zip unpacks to more than the 1000 bytes offered")) { try result.get() }
        #expect(!FileManager.default.fileExists(atPath: out))
    }

    @Test func garbageIsNotAZip() throws {
        let dir = try Self.made.get()
        let path = dir.appendingPathComponent("garbage.zip").path
        try Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 * 31) }).write(to: URL(fileURLWithPath: path))
        let (out, result) = try unpack("garbage.zip")
        #expect(throws: WormholeError.self) { try result.get() }
        #expect(!FileManager.default.fileExists(atPath: out))
    }

    /// Random bytes fed to the inflater end in an error or in output within the limit,
    /// never a crash or output past the limit.
    @Test func inflaterSurvivesGarbage() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            let garbage = (0..<Int.random(in: 1...400, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            var fed = false
            var total = 0
            var inflater = Inflater(limit: 10_000, input: { defer { fed = true }; return fed ? nil : garbage }, output: { total += $0.count })
            _ = try? inflater.run()
            #expect(total <= 10_000)
        }
    }
}
