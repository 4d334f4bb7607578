import Foundation
import Glibc
@testable import PeerFiles
import Testing

/// Small POSIX helpers to build trees in tests (no Foundation file APIs in the hot loops).
enum Tree {
    static func write(_ path: String, _ text: String) throws { try writeFile(path, Array(text.utf8)) }

    static func mkdir(_ path: String) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    static func symlink(_ path: String, to target: String) {
        #expect(Glibc.symlink(target, path) == 0)
    }

    static func chmod(_ path: String, _ mode: mode_t) {
        #expect(Glibc.chmod(path, mode) == 0)
    }

    /// Sets the mtime (nanoseconds since 1970) explicitly: rewrites within one clock tick
    /// may keep the same mtime, tests never depend on that.
    static func setMtime(_ path: String, ns: Int64) {
        var times = [timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000)),
                     timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))]
        #expect(utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0)
    }

    static func stat(_ path: String) -> Glibc.stat {
        var st = Glibc.stat()
        _ = lstat(path, &st)
        return st
    }

    static func mtimeNs(_ path: String) -> Int64 {
        let st = stat(path)
        return Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
    }

    /// Rewrites a file in place (same inode) with `text`.
    static func rewrite(_ path: String, _ text: String) {
        let fd = open(path, O_WRONLY | O_TRUNC)
        #expect(fd >= 0)
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }
}

/// Collects what a scan reports.
final class ScanResult {
    var batches: [ScanBatch] = []
    var added: [String: ScannedEntry] = [:]
    var changed: [String: ScannedEntry] = [:]
    var deleted: [String] = []
    var unstable: [String] = []
    var problems: [ScanProblem] = []

    func record(_ batch: ScanBatch) {
        batches.append(batch)
        for e in batch.added { added[e.path] = e }
        for e in batch.changed { changed[e.path] = e }
        deleted += batch.deleted
        unstable += batch.unstable
        problems += batch.problems
    }

    var reported: Set<String> { Set(added.keys).union(changed.keys).union(deleted).union(unstable) }
}

/// Scans `root` against `known`, applies the result to `known` and returns it.
@discardableResult
func scanAndApply(_ scanner: FolderScanner, _ known: inout KnownEntryList,
                  paths: [String]? = nil) throws -> (ScanResult, ScanSummary) {
    let result = ScanResult()
    var copy = known
    let summary: ScanSummary
    if let paths {
        summary = try scanner.scan(paths: paths, known: known) { batch in
            result.record(batch)
            copy.apply(batch)
        }
    } else {
        summary = try scanner.scan(known: known) { batch in
            result.record(batch)
            copy.apply(batch)
        }
    }
    known = copy
    return (result, summary)
}
