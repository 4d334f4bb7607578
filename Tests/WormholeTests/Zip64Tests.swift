import Foundation
import Testing
@testable import Wormhole

/// Zip64: a well-formed zip64 archive unpacks exactly; one whose zip64 counts, sizes or offsets
/// lie is refused within bounds and leaves nothing (zips from `Zips/make_zip64.py`, the good one
/// checked there with Python's zipfile). Our own zip64 (`FolderZipper` with every size and
/// offset as zip64) is read by Python's zipfile and by `SafeUnzipper`.
@Suite(.serialized)
struct Zip64Tests {
    static let made = SafeUnzipperTests.zips(by: "make_zip64.py")

    func unpack(_ path: String) -> (String, Result<Int, WormholeError>) {
        let destination = path + "-out-\(UUID().uuidString)"
        let result = Result { () throws(WormholeError) in try SafeUnzipper(zipPath: path, maxTotal: 1 << 30).unpack(into: destination) }
        return (destination, result)
    }

    @Test func aZip64ArchiveUnpacksExactly() throws {
        let (out, result) = unpack(try Self.made.get().appendingPathComponent("zip64-good.zip").path)
        defer { try? FileManager.default.removeItem(atPath: out) }
        #expect(try result.get() == 3)
        #expect(FileManager.default.contents(atPath: out + "/a.txt") == Data(String(repeating: "alpha\n", count: 10).utf8))
        #expect(FileManager.default.contents(atPath: out + "/sub/b.bin") == Data((0..<1024).map { UInt8($0 % 256) }))
        #expect(FileManager.default.contents(atPath: out + "/sub/c.txt") == Data())
    }

    @Test(arguments: [
        ("count-huge", "too large or out of bounds"), ("count-more", "damaged zip directory"),
        ("directory-past-end", "too large or out of bounds"), ("directory-overlaps-record", "too large or out of bounds"),
        ("record-signature", "damaged zip64 end record"), ("locator-past-end", "zip64 end record lies outside the archive"),
        ("locator-into-entries", "damaged zip64 end record"), ("records-disagree", "two end records disagree"),
        ("no-zip64-end", "no zip64 end record"), ("entry-size", "more than the 1073741824 bytes offered"),
        ("entry-compressed", "lies outside the archive"), ("entry-offset", "lies outside the archive"),
        ("entry-offset-sign", "out of range"), ("no-zip64-field", "without its zip64 field"),
        ("short-zip64-field", "zip64 field is short"), ("overrun-extra", "overruns its entry"),
    ])
    func lyingZip64FieldsAreRefusedAndLeaveNothing(_ lie: String, _ reason: String) throws {
        let (out, result) = unpack(try Self.made.get().appendingPathComponent("zip64-\(lie).zip").path)
        #expect(throws: WormholeError.self) { try result.get() }
        if case let .failure(error) = result { #expect(error.description.contains(reason), "\(lie): \(error)") }
        #expect(!FileManager.default.fileExists(atPath: out), "nothing left behind")
    }

    /// A folder zipped with every size and offset as zip64 (and the zip64 end records): Python's
    /// zipfile (what `wormhole receive` unpacks with) reads every entry, CRC and mode; so do we.
    @Test func ourZip64IsReadByPythonAndByUs() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("zipper-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = root + "/album"
        try FileManager.default.createDirectory(atPath: folder + "/2026/june", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: folder + "/empty", withIntermediateDirectories: true)
        let noise = Data((0..<70_000).map { _ in UInt8.random(in: 0...255) })
        try noise.write(to: URL(fileURLWithPath: folder + "/2026/june/photo.raw"))
        try Data("#!/bin/sh\n".utf8).write(to: URL(fileURLWithPath: folder + "/run.sh"))
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder + "/run.sh")
        let zip = root + "/album.zip"
        let summary = try FolderZipper.zip(folder: folder, to: zip, zip64From: 0)
        #expect(summary.files == 2)

        let check = """
            import sys, zipfile
            z = zipfile.ZipFile(sys.argv[1])
            assert z.testzip() is None
            for i in sorted(z.infolist(), key=lambda i: i.filename):
                print(i.filename, i.file_size, oct(i.external_attr >> 16 & 0o777))
            """
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        python.arguments = ["-c", check, zip]
        let pipe = Pipe()
        python.standardOutput = pipe
        try python.run()
        let listing = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        python.waitUntilExit()
        #expect(python.terminationStatus == 0)
        #expect(listing == "2026/ 0 0o755\n2026/june/ 0 0o755\n2026/june/photo.raw 70000 0o644\nempty/ 0 0o755\nrun.sh 10 0o755\n", "\(listing)")

        let (out, result) = unpack(zip)
        defer { try? FileManager.default.removeItem(atPath: out) }
        #expect(try result.get() == 2)
        #expect(FileManager.default.contents(atPath: out + "/2026/june/photo.raw") == noise)
        #expect(try FileManager.default.attributesOfItem(atPath: out + "/run.sh")[.posixPermissions] as? Int == 0o755)
    }
}
