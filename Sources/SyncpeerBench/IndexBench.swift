import Dispatch
import FoundationEssentials
import Glibc
import PeerFiles
import PeerModel
import PeerIndex

/// The index's cost per file of what workload B does with it, in µs: recording scanned or
/// placed files (`upsertFiles`, batches as the scanner's), storing a peer's entries
/// (`upsertRemoteFiles`), and looking up chunks that no local file has
/// (`localChunkLocations`). One fresh index in `directory` per run; best of `runs`.
func indexBenchmarks(directory: String, files: Int, batch: Int, runs: Int) throws -> [String: Any] {
    let device = String(repeating: "A", count: 56)
    let local = String(repeating: "B", count: 56)
    var best: [String: Double] = [:]
    for run in 0..<runs {
        let path = directory + "/index-bench-\(getpid())-\(run).db"
        defer { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }
        let index = try NodeIndex.open(at: path)
        try index.upsertPeer(PeerRecord(deviceID: device, name: "peer", publicKey: [UInt8](repeating: 7, count: 32), trust: .paired,
                                        firstSeen: 0, pairedAt: 0))
        let folder = "bench-folder"
        _ = try index.addFolder(id: folder, path: directory, sharedWith: [device])
        let hashes = (0..<files).map { _ in (0..<32).map { _ in UInt8.random(in: 0...255) } }
        let manifest = [UInt8](repeating: 3, count: 80)
        func timed(_ name: String, _ body: () throws -> Void) rethrows {
            let start = DispatchTime.now().uptimeNanoseconds
            try body()
            let perFile = Double(DispatchTime.now().uptimeNanoseconds - start) / 1000 / Double(files)
            best[name] = min(best[name] ?? .infinity, perFile)
        }
        // New paths, then the same paths again (each an update of its row).
        for (name, counter) in [("upsert_files_us", UInt64(1)), ("update_files_us", 2)] {
            try timed(name) {
                for first in stride(from: 0, to: files, by: batch) {
                    let rows = (first..<min(files, first + batch)).map { i in
                        FileRecord(folderID: folder, FileEntry(path: PlainText.format( "small/f%05d.bin", i), kind: .file, size: 4096, mtimeNs: 1_700_000_000_000_000_000 + Int64(i), mode: 0o644, version: [local: counter], rootHash: hashes[i], modifiedBy: local), inode: UInt64(1000 + i), chunks: [FileChunkRecord(offset: 0, size: 4096, hash: hashes[i])])
                    }
                    try index.upsertFiles(rows)
                }
            }
        }
        try timed("upsert_remote_files_us") {
            for first in stride(from: 0, to: files, by: batch) {
                let rows = (first..<min(files, first + batch)).map { i in
                    RemoteFileRecord(FileEntry(path: PlainText.format( "small/g%05d.bin", i), kind: .file, size: 4096, mtimeNs: 1_700_000_000_000_000_000 + Int64(i), mode: 0o644, version: [device: 1], rootHash: hashes[i], modifiedBy: device, sequence: Int64(i + 1)), manifest: manifest)
                }
                try index.upsertRemoteFiles(folderID: folder, deviceID: device, rows, receivedSequence: Int64(rows.count))
            }
        }
        let absent = (0..<files).map { _ in (0..<32).map { _ in UInt8.random(in: 0...255) } }
        try timed("absent_chunk_lookup_us") {
            for first in stride(from: 0, to: files, by: batch) {
                _ = try index.localChunkLocations(hashes: absent[first..<min(files, first + batch)])
            }
        }
    }
    return ["files": files, "batch": batch, "runs": runs].merging(best.mapValues { ($0 * 100).rounded() / 100 }) { a, _ in a }
}
