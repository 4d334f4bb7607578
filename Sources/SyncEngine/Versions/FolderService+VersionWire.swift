internal import Dispatch
internal import Foundation
internal import PeerFiles
internal import PeerIndex
internal import PeerWire
internal import Synchronization

/// The version requests of issue 41 on the wire (`version-request`, `version-response`):
/// members ask each other which versions of a path they keep, a page at a time, and for one
/// version's manifest. Only a member of the folder gets an answer; every list is paged
/// (`WireLimits.maxVersionPage`, `versionPage` here) and every answer fits a frame.
extension FolderService {
    /// Versions in one answer to a peer (a peer asks again for more).
    static let versionPage = 200
    /// How long a version request waits for its answer.
    static let versionTimeout: DispatchTimeInterval = .seconds(10)

    /// Answers a peer's version request (on `queue`): nothing but `ok: false` for a non-member
    /// or a folder we do not have, an unsafe path, or an ignored one.
    func serveVersionRequest(_ request: UInt32, folderID: String, path: String, tree: Bool, before: UInt64, version: UInt64,
                             from session: LinkSession) {
        dispatchPrecondition(condition: .onQueue(queue))
        let (found, link) = state.withLock { ($0.folders[folderID], $0.link) }
        func refuse() { link?.send([.versionResponse(request: request, ok: false, data: [])], on: session.id) }
        // "/" asks for the whole folder (a tree request only).
        guard let folder = found, isMember(session.deviceKey, of: folderID),
              let relative = path == "/" && tree ? "" : (try? SafePath(path))?.string else { return refuse() }
        let ignores = folder.servedIgnores.withLock { $0 }
        guard let ignores, relative.isEmpty || !ignores.isIgnored(relative, isDirectory: tree) else { return refuse() }
        let page: VersionPage
        do {
            page = try versionPage(folderID: folderID, path: relative, tree: tree, before: before, version: version,
                                   ignores: ignores)
        } catch {
            return refuse()
        }
        link?.send([.versionResponse(request: request, ok: true, data: page.encoded())], on: session.id)
    }

    /// One page of our versions as the wire lists them (or the one version `version` with its
    /// manifest, when it fits a frame).
    func versionPage(folderID: String, path: String, tree: Bool, before: UInt64, version: UInt64,
                     ignores: IgnorePatterns?) throws -> VersionPage {
        if version != 0 {
            guard let id = Int64(exactly: version), let record = try index.version(folderID: folderID, id: id),
                  record.path == path || (tree && (path.isEmpty || record.path.hasPrefix(path + "/"))),
                  let manifest = try? Manifest(fileSize: UInt64(record.size), chunks: record.chunks.compactMap(\.chunkRef)) else {
                return VersionPage(entries: [], more: false)
            }
            let encoded = manifest.encode()
            guard encoded.count <= WireLimits.maxManifest else { return VersionPage(entries: [], more: false) }
            return VersionPage(entries: [Self.wireEntry(record, manifest: encoded)], more: false)
        }
        let limit = Self.versionPage
        let records = try index.versions(folderID: folderID, path: path, underPrefix: tree,
                                         before: before == 0 ? nil : Int64(clamping: before), limit: limit + 1)
        let shown = records.prefix(limit).filter { ignores?.isIgnored($0.path, isDirectory: false) != true }
        return VersionPage(entries: shown.map { Self.wireEntry($0, manifest: []) }, more: records.count > limit)
    }

    static func wireEntry(_ record: VersionRecord, manifest: [UInt8]) -> VersionEntry {
        VersionEntry(id: UInt64(record.id), path: record.path, keptAt: record.keptAt, size: UInt64(max(0, record.size)),
                     mtimeNs: record.mtimeNs, modifiedBy: String(record.modifiedBy.prefix(64)),
                     reason: String(record.reason.prefix(32)), held: record.held, rootHash: record.rootHash, manifest: manifest)
    }

    /// Asks `device` for a page of its versions (or one version); the callback gets the page,
    /// or nil (refused, not connected, timed out, or an answer that does not decode). Any
    /// thread; the callback runs on `queue`.
    func requestVersions(device: String, folderID: String, path: String, tree: Bool, before: UInt64, version: UInt64,
                         callback: @escaping @Sendable (VersionPage?) -> Void) {
        queue.async { [self] in
            let link = link
            guard let session = link?.connectedSession(device: device) else { return callback(nil) }
            let request = state.withLock { state in
                defer { state.nextRequest &+= 1 }
                return state.nextRequest
            }
            let frame = Frame.versionRequest(request: request, folder: folderID, path: path, tree: tree, before: before, version: version)
            guard (try? frame.validate()) != nil else { return callback(nil) }
            state.withLock { $0.pendingVersions[request] = (device, callback) }
            link?.send([frame], on: session.id)
            queue.asyncAfter(deadline: .now() + Self.versionTimeout) { [self] in
                state.withLock { $0.pendingVersions.removeValue(forKey: request) }?.callback(nil)
            }
        }
    }

    /// A peer's answer to our version request (on `queue`): only the asked peer settles it.
    func versionResponseReceived(_ request: UInt32, ok: Bool, data: [UInt8], from session: LinkSession) {
        dispatchPrecondition(condition: .onQueue(queue))
        let answered = state.withLock { state in
            state.pendingVersions[request]?.device == session.deviceKey ? state.pendingVersions.removeValue(forKey: request) : nil
        }
        guard let pending = answered else { return }
        guard ok, let page = try? VersionPage.decode(data) else { return pending.callback(nil) }
        pending.callback(page)
    }
}

extension FileChunkRecord {
    /// As a manifest's chunk (nil for a record that cannot be one).
    var chunkRef: ChunkRef? {
        guard let hash = ChunkHash(bytes: hash), let offset = UInt64(exactly: offset), let size = UInt32(exactly: size) else { return nil }
        return ChunkRef(offset: offset, size: size, hash: hash)
    }
}
