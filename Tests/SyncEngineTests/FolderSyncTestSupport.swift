import PeerModel
@testable import SyncEngine

/// Device IDs in byte order: devA < devB < devC (the tie rule picks the larger).
let devA = String(repeating: "A", count: 56)
let devB = String(repeating: "B", count: 56)
let devC = String(repeating: "C", count: 56)

func vv(_ pairs: KeyValuePairs<String, UInt64>) -> VersionVector {
    VersionVector(Dictionary(uniqueKeysWithValues: pairs.map { ($0.key, $0.value) }))
}

func hash(_ n: UInt8) -> [UInt8] { [UInt8](repeating: n, count: 32) }

let t0: Int64 = 1_700_000_000_000_000_000

func file(_ path: String, _ version: VersionVector, content: UInt8 = 1, mtime: Int64 = t0, by device: String = devA,
          mode: UInt32 = 0o644) -> FileEntry {
    FileEntry(path: path, kind: .file, size: 100 + Int64(content), mtimeNs: mtime, mode: mode, version: version,
              rootHash: hash(content), modifiedBy: device)
}

func tombstone(_ path: String, _ version: VersionVector, mtime: Int64 = t0, by device: String = devA) -> FileEntry {
    FileEntry(path: path, kind: .file, mtimeNs: mtime, mode: 0o644, deleted: true, version: version, modifiedBy: device)
}

func directory(_ path: String, _ version: VersionVector, mtime: Int64 = t0, by device: String = devA,
               mode: UInt32 = 0o755) -> FileEntry {
    FileEntry(path: path, kind: .directory, mtimeNs: mtime, mode: mode, version: version, modifiedBy: device)
}

func symlink(_ path: String, _ version: VersionVector, target: String, mtime: Int64 = t0, by device: String = devA,
             mode: UInt32 = 0o777) -> FileEntry {
    FileEntry(path: path, kind: .symlink, mtimeNs: mtime, mode: mode, symlinkTarget: target, version: version, modifiedBy: device)
}

extension FileEntry {
    func version(_ v: VersionVector) -> FileEntry { var c = self; c.version = v; c.sequence = 0; return c }
}


// The same helpers for the default path "doc.txt".
func file(_ version: VersionVector, content: UInt8 = 1, mtime: Int64 = t0, by device: String = devA, mode: UInt32 = 0o644) -> FileEntry {
    file("doc.txt", version, content: content, mtime: mtime, by: device, mode: mode)
}
func tombstone(_ version: VersionVector, mtime: Int64 = t0, by device: String = devA) -> FileEntry {
    tombstone("doc.txt", version, mtime: mtime, by: device)
}
func directory(_ version: VersionVector, mtime: Int64 = t0, by device: String = devA, mode: UInt32 = 0o755) -> FileEntry {
    directory("doc.txt", version, mtime: mtime, by: device, mode: mode)
}

/// A path as a scan finds it on disk: an entry without a version yet (what `LocalChanges` takes).
func onDisk(path: String, kind: FileKind, size: Int64 = 0, mtimeNs: Int64, mode: UInt32, symlinkTarget: String? = nil,
            rootHash: [UInt8]? = nil) -> FileEntry {
    FileEntry(path: path, kind: kind, size: size, mtimeNs: mtimeNs, mode: mode, symlinkTarget: symlinkTarget, version: [:],
              rootHash: rootHash, modifiedBy: "")
}
