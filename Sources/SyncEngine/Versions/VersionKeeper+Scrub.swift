internal import PeerFiles
internal import PeerIndex

/// `syncpeer verify DIR` for the versions a folder keeps: their chunks read back and hashed.
extension VersionKeeper {
    /// Versions read per page of the index.
    static let scrubPage = 256
    /// Chunks remembered as verified during one scrub (a chunk shared by many versions is
    /// read once): beyond it, read again. 32 bytes each.
    static let scrubRemembered = 200_000

    /// Reads every chunk of the folder's held versions, from its chunk file or pack, each
    /// hashed: a version with a chunk missing or no longer matching (a damaged pack, a
    /// removed chunk file) is marked not held, as `history` then lists it, and a peer that
    /// holds it can serve it. Returns how many held versions were read and how many of those
    /// were found damaged. An index that cannot say stops it, said.
    func scrub(folderID: String) -> (checked: Int, damaged: Int) {
        var verified = Set<ChunkHash>()
        var (checked, damaged) = (0, 0)
        var before: Int64?
        do throws(IndexError) {
            while true {
                let page = try index.versions(folderID: folderID, path: "", underPrefix: true, before: before, limit: Self.scrubPage)
                for listed in page where listed.held {
                    guard let version = try index.version(folderID: folderID, id: listed.id) else { continue }
                    checked += 1
                    var lost: [[UInt8]] = []
                    for chunk in version.chunks {
                        guard let hash = ChunkHash(bytes: chunk.hash) else { continue }
                        if verified.contains(hash) { continue }
                        guard store.read(hash, size: Int(chunk.size)) != nil else {
                            lost.append(chunk.hash)
                            continue
                        }
                        if verified.count < Self.scrubRemembered { verified.insert(hash) }
                    }
                    guard !lost.isEmpty else { continue }
                    damaged += 1
                    try index.setVersionsNotHeld(holdingAny: lost)
                }
                guard page.count == Self.scrubPage, let last = page.last else { break }
                before = last.id
            }
        } catch {
            report("versions of folder \(folderID) not all verified: \(error)")
        }
        return (checked, damaged)
    }
}
