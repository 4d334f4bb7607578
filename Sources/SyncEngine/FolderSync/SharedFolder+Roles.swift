internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles
internal import PeerIndex
internal import Synchronization

/// A shared folder's roles per peer (issue 41 point 3): what the pulls plan leaves out,
/// what `syncpeer changes` lists, and `override` / `revert`. The rules are `FolderRoles`.
extension SharedFolder {
    /// A path where the roles keep the folder apart from a peer.
    struct RoleDifference: Sendable, Equatable {
        enum Kind: String, Sendable { case notApplied = "not-applied", locallyChanged = "locally-changed" }
        let path: String
        let kind: Kind
        /// The peer concerned.
        let device: String
        /// The state that peer has (nil: none).
        let theirs: FileState?
        /// Ours (nil: none).
        let ours: FileState?
    }

    /// Reads our role towards each member (io; at the start of every pull). An index that
    /// cannot say throws (a pull must not plan as if every member could change everything).
    func loadPolicies(index: NodeIndex) throws(IndexError) {
        dispatchPrecondition(condition: .onQueue(io))
        let policies = try index.folderPeerRoles(folderID: id).mapValues(PeerPolicy.init)
        state.withLock { $0.policies = policies }
    }

    /// The peers' states the roles let into planning (io).
    func admitted(_ remotes: [PathKey: [String: FileState]], local: [PathKey: FileState]) -> [PathKey: [String: FileState]] {
        let policies = state.withLock { $0.policies }
        guard policies.values.contains(where: { $0 != PeerPolicy() }) else { return remotes }
        return remotes.compactMapValues { states in
            let admitted = FolderRoles.split(states, policies: policies).admitted
            return admitted.isEmpty ? nil : admitted
        }
    }

    /// Paths where the roles keep us apart from a peer, in path order after `after`: a
    /// send-only or no-deletes peer's changes we did not apply, and our own changes a
    /// receive-only peer was not sent. Reads a page of the index at a time and stops after
    /// the path at which `limit` are found (a path's items are never split; `more`: there
    /// may be more). Any thread: index reads only; one that fails throws its error.
    func roleDifferences(after: String?, limit: Int, localDevice: String) throws(IndexError) -> (items: [RoleDifference], more: Bool) {
        guard let index else { return ([], false) }
        let policies = try index.folderPeerRoles(folderID: id).mapValues(PeerPolicy.init)
        let receiveOnly = policies.filter { $0.value.role == .receiveOnly }.keys.sorted()
        guard policies.values.contains(where: { $0 != PeerPolicy() }) else { return ([], false) }
        var found: [RoleDifference] = []
        var cursor = after
        while true {
            // The union of the local and the peers' paths of the next page.
            let remotes = try index.remoteFiles(folderID: id, afterPath: cursor, pathLimit: Self.planPage)
            let locals = try index.files(folderID: id, afterPath: cursor, limit: Self.planPage, includeChunks: false)
            // A full page bounds what is known of its side; the shorter bound ends this step
            // (nil: both sides are read to their end).
            var bounds: [PathKey] = []
            if let last = remotes.last?.record.path, Set(remotes.map(\.record.path)).count >= Self.planPage { bounds.append(PathKey(last)) }
            if let last = locals.last?.path, locals.count >= Self.planPage { bounds.append(PathKey(last)) }
            let end = bounds.min()
            func within(_ path: String) -> Bool { end.map { PathKey(path) <= $0 } ?? true }
            var byPath: [PathKey: (local: FileState?, remote: [String: FileState])] = [:]
            for record in locals where within(record.path) { byPath[PathKey(record.path), default: (nil, [:])].local = FileState(record) }
            for (device, record) in remotes where within(record.path) {
                byPath[PathKey(record.path), default: (nil, [:])].remote[device] = FileState(record)
            }
            for path in byPath.keys.sorted() {
                let (local, remote) = byPath[path]!
                for (device, state) in remote.sorted(by: { $0.key < $1.key })
                where !FolderRoles.admits(state, from: device, policies: policies) && FolderRoles.notApplied(state, local: local) {
                    found.append(RoleDifference(path: path.string, kind: .notApplied, device: device, theirs: state, ours: local))
                }
                for device in receiveOnly {
                    if let local, FolderRoles.locallyChanged(local, peer: remote[device], localDevice: localDevice) {
                        found.append(RoleDifference(path: path.string, kind: .locallyChanged, device: device,
                                                    theirs: remote[device], ours: local))
                    }
                }
                // A page holds whole paths (every peer's item of a path): `after` is a path.
                if found.count >= limit { return (found, true) }
            }
            guard let end else { break }
            cursor = end.string
        }
        return (found, false)
    }

    /// `syncpeer override DIR`: our versions win at the peers whose changes the roles (or a
    /// held mass change) keep out. Each such path is recorded again with a version that
    /// dominates theirs (`FolderRoles.override`), so it goes out as a plain update; a path we
    /// do not have is recorded as deleted. Returns how many paths. On io.
    func overrideHeld(localDevice: String, limit: Int = 100_000) throws(EngineError) -> Int {
        dispatchPrecondition(condition: .onQueue(io))
        guard let index else { return 0 }
        var after: String?
        var rows: [FileRecord] = []
        var heldByPath: [String: [FileState]] = [:]
        // A held mass change: every path a peer's newer state would change here.
        // (Read whole before the hold is let go: an index that fails keeps it.)
        if massHold.withLock({ $0 }) != nil {
            let members = state.withLock { Set($0.policies.keys) }
            var cursor: String?
            while heldByPath.count < limit {
                let page: [(deviceID: String, record: RemoteFileRecord)]
                do { page = try index.remoteFiles(folderID: id, afterPath: cursor, pathLimit: Self.planPage) } catch { throw .index(error) }
                guard let last = page.last?.record.path else { break }
                for (device, record) in page where members.contains(device) {
                    heldByPath[record.path, default: []].append(FileState(record))
                }
                cursor = last
            }
            massHold.withLock { $0 = nil }
            state.withLock { $0.massGuard = MassChangeGuard(limits: $0.massGuard.limits) }
            clearError()
        }
        while heldByPath.count < limit {
            let page: (items: [RoleDifference], more: Bool)
            do { page = try roleDifferences(after: after, limit: 500, localDevice: localDevice) } catch { throw .index(error) }
            for item in page.items where item.kind == .notApplied {
                if let theirs = item.theirs { heldByPath[item.path, default: []].append(theirs) }
            }
            guard page.more, let last = page.items.last?.path else { break }
            after = last
        }
        for start in stride(from: 0, to: heldByPath.count, by: Self.deletionBatch) {
            let paths = heldByPath.keys.sorted().dropFirst(start).prefix(Self.deletionBatch)
            let olds: [String: FileRecord]
            do { olds = try index.files(folderID: id, paths: paths) } catch { throw .index(error) }
            for path in paths {
                let held = heldByPath[path]!
                let ours: FileState
                if let old = olds[path] {
                    ours = FileState(old)
                } else {
                    let newest = held.max { $0.mtimeNs < $1.mtimeNs }!
                    ours = FileState(path: path, kind: newest.kind, mtimeNs: Self.nowNs(), mode: newest.mode, deleted: true,
                                     version: VersionVector(), modifiedBy: localDevice)
                }
                // Only where theirs is not already below ours.
                guard held.contains(where: { !ours.version.dominates($0.version) }) else { continue }
                let state = FolderRoles.override(ours, over: held, localDevice: localDevice)
                var row = olds[path] ?? state.fileRecord(folderID: id)
                row.version = state.version.counters
                row.modifiedBy = localDevice
                rows.append(row)
            }
        }
        if !rows.isEmpty {
            do { _ = try index.upsertFiles(rows) } catch { throw .index(error) }
            host?.folderChanged(id)
        }
        return rows.count
    }
}
