internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles
internal import PeerIndex
internal import PeerWire
internal import Synchronization

/// `syncpeer history PATH` and the listing `restore` chooses from: this node's versions and
/// those of the folder's connected members (`version-request`), each list bounded.
extension FolderService {
    /// A version as listed by one device (ours: `local`).
    struct KnownVersion: Sendable {
        var device: String
        var local: Bool
        var entry: VersionEntry
    }

    /// The shared folder holding `path` (absolute or relative to the working directory of
    /// the caller, made absolute by the client) and the path relative to its root ("" for
    /// the root itself).
    func folder(holding path: String) throws(EngineError) -> (folder: SharedFolder, relative: String) {
        let list = sharedFolders()
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        if let folder = list.first(where: { $0.root == absolute }) { return (folder, "") }
        guard let folder = list.first(where: { absolute.hasPrefix($0.root + "/") }) else {
            throw .notFound("\(path) is not in a shared folder")
        }
        let relative = String(absolute.dropFirst(folder.root.count + 1))
        guard (try? SafePath(relative)) != nil else { throw .invalidArgument("\(path): not a path syncpeer can sync") }
        return (folder, relative)
    }

    /// Every version of `relative` (and under it) known here and on connected members, at
    /// most `HistoryResult.limit` from each; and how many members were asked and answered,
    /// and whether a list was cut. Never on `queue` (the answers come there); the members are
    /// read there. (They were read on the caller's thread: the connections' session table,
    /// which `queue` changes, read at the same time.) Our index failing to list ours fails
    /// it with the index's error (not a list of the members' versions only).
    func knownVersions(folder: SharedFolder, relative: String) throws(EngineError) -> (versions: [KnownVersion], asked: Int, answered: Int, truncated: Bool) {
        let local: [VersionRecord]
        do throws(IndexError) {
            local = try index.versions(folderID: folder.id, path: relative, underPrefix: true, limit: HistoryResult.limit + 1)
        } catch { throw .index(error) }
        let truncated = local.count > HistoryResult.limit
        let known = local.prefix(HistoryResult.limit).map { KnownVersion(device: localDevice, local: true, entry: Self.wireEntry($0, manifest: [])) }
        dispatchPrecondition(condition: .notOnQueue(queue))
        let members = queue.sync { connectedMembers(of: folder.id).map(\.deviceKey) }
        let collected = Mutex<(versions: [KnownVersion], answered: Int, truncated: Bool)>(([], 0, false))
        let group = DispatchGroup()
        let wirePath = relative.isEmpty ? "/" : relative
        for device in members {
            group.enter()
            @Sendable func page(before: UInt64, got: Int) {
                requestVersions(device: device, folderID: folder.id, path: wirePath, tree: true, before: before, version: 0) { answer in
                    guard let answer else { return group.leave() }
                    // Hostile input: only safe paths (no "..", no absolute path: restore writes
                    // there) inside what was asked for are taken, with a root hash of 32 bytes.
                    let inside = answer.entries.filter {
                        (try? SafePath($0.path))?.string == $0.path && $0.rootHash.count == 32
                            && (relative.isEmpty || $0.path == relative || $0.path.hasPrefix(relative + "/"))
                    }.prefix(HistoryResult.limit - got)
                    let total = got + inside.count
                    let last = answer.entries.last?.id ?? 0
                    let more = answer.more && last > 0 && (before == 0 || last < before)
                    collected.withLock { state in
                        state.versions += inside.map { KnownVersion(device: device, local: false, entry: $0) }
                        if total >= HistoryResult.limit && more { state.truncated = true }
                    }
                    if more, total < HistoryResult.limit { return page(before: last, got: total) }
                    collected.withLock { $0.answered += 1 }
                    group.leave()
                }
            }
            page(before: 0, got: 0)
        }
        _ = group.wait(timeout: .now() + .seconds(30))
        let remote = collected.withLock { $0 }
        return (known + remote.versions, members.count, remote.answered, truncated || remote.truncated)
    }

    func history(path: String, localName: String) throws(EngineError) -> HistoryResult {
        let (folder, relative) = try folder(holding: path)
        let found = try knownVersions(folder: folder, relative: relative)
        let peers: [PeerRecord]
        do throws(IndexError) { peers = try index.peers() } catch { throw .index(error) }
        let names = Dictionary(peers.map { ($0.deviceID, $0.name) }, uniquingKeysWith: { a, _ in a })
        func name(_ device: String) -> String? { device == localDevice ? localName : names[device] }
        let versions = found.versions.map { known in
            HistoryResult.Version(
                id: String(known.device.prefix(7)) + "-" + String(known.entry.id), path: known.entry.path,
                device: String(known.device.prefix(7)), deviceName: name(known.device) ?? String(known.device.prefix(7)),
                local: known.local, keptAt: known.entry.keptAt, size: Int64(clamping: known.entry.size),
                mtime: known.entry.mtimeNs / 1_000_000, changedBy: String(known.entry.modifiedBy.prefix(7)),
                changedByName: name(known.entry.modifiedBy), reason: known.entry.reason, held: known.entry.held,
                content: known.entry.rootHash.map { String($0, radix: 16).leftPadded(to: 2) }.joined())
        }.sorted { ($0.keptAt, $0.id) > ($1.keptAt, $1.id) }
        return HistoryResult(folder: folder.id, path: relative.isEmpty ? folder.root : folder.root + "/" + relative,
                             versions: versions, peersAsked: found.asked, peersAnswered: found.answered, truncated: found.truncated)
    }
}

extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
