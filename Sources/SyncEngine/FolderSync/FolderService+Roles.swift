internal import Dispatch
internal import FoundationEssentials
internal import PeerIndex
internal import Synchronization

/// Roles per peer and the mass-change guard as the control requests reach them (`role`,
/// `changes`, `override`, `guard`), and the role filter of the index sent to a peer.
extension FolderService {
    /// Sets our role towards members of a folder (the folder's io then plans with it).
    /// `role` nil keeps the member's role, `noDeletes` nil its deletion switch.
    func setRole(folderID: String, devices: [String], role: PeerRole?, noDeletes: Bool?) throws(EngineError) {
        let released = try storeRole(folderID: folderID, devices: devices, role: role, noDeletes: noDeletes)
        guard let folder = queue.sync(execute: { () -> SharedFolder? in
            // A peer we were receive-only towards missed our own changes: its index goes
            // again from the start (what it has already is planned as up to date there).
            let folder = state.withLock { state in
                for device in released { state.sent["\(folderID)|\(device)"] = nil }
                return state.folders[folderID]
            }
            // (A write that fails leaves the peer's index to go from where it was: said, not fatal.)
            for device in released {
                do throws(IndexError) { try index.setAckedSequence(folderID: folderID, deviceID: device, 0) } catch {
                    emitError(nil, "cannot reset what was sent of folder \(folderID) to \(device): \(error)")
                }
            }
            return folder
        }) else { return }
        // A peer that may change the folder again gets what it sent meanwhile applied;
        // a receive-only one is sent what it was not.
        folder.io.async { folder.pull(paths: nil) }
        folderChanged(folderID)
    }

    /// Writes the roles (any thread; `share` calls it on `queue`, before any index page of
    /// the new members can be stored or planned). Returns the devices that were receive-only
    /// and are no longer.
    @discardableResult
    func storeRole(folderID: String, devices: [String], role: PeerRole?, noDeletes: Bool?) throws(EngineError) -> [String] {
        guard role != nil || noDeletes != nil else { return [] }
        var released: [String] = []
        do {
            let current = try index.folderPeerRoles(folderID: folderID)
            for device in devices {
                guard let stored = current[device] else {
                    throw EngineError.notFound("the folder is not shared with that peer; share it first ('syncpeer share DIR --with PEER')")
                }
                var policy = PeerPolicy(stored)
                if let role {
                    if policy.role == .receiveOnly && role != .receiveOnly { released.append(device) }
                    policy.role = role
                }
                if let noDeletes { policy.noDeletes = noDeletes }
                try index.setFolderPeerRole(folderID: folderID, deviceID: device, policy.stored)
            }
        } catch let error as EngineError { throw error } catch let error as IndexError { throw .index(error) } catch {
            throw .io(path: folderID, reason: "\(error)")
        }
        return released
    }

    /// `syncpeer role DIR PEER ROLE`.
    func setRole(directory: String, device: String, role: PeerRole?, noDeletes: Bool?) throws(EngineError) -> RoleResult {
        let folder = try sharedFolder(at: directory)
        try setRole(folderID: folder.id, devices: [device], role: role, noDeletes: noDeletes)
        let roles: [String: FolderPeerRole]
        do throws(IndexError) { roles = try index.folderPeerRoles(folderID: folder.id) } catch { throw .index(error) }
        let policy = roles[device].map(PeerPolicy.init) ?? PeerPolicy()
        guard let peer = memberRef(device) else { throw .notFound("unknown peer \(device)") }
        return RoleResult(folder: folder.id, path: folder.root, peer: peer, role: policy.role.rawValue, noDeletes: policy.noDeletes)
    }

    /// `syncpeer changes DIR`: one page of the paths the roles keep apart (by path).
    func roleChanges(directory: String, page: PageRequest) throws(EngineError) -> ListPage<RoleChange> {
        let folder = try sharedFolder(at: directory)
        let found: (items: [SharedFolder.RoleDifference], more: Bool)
        do throws(IndexError) {
            found = try folder.roleDifferences(after: page.after, limit: min(page.limit, PageRequest.maxLimit), localDevice: localDevice)
        } catch { throw .index(error) }
        func describe(_ state: FileState?) -> String? { state.map { $0.deleted ? "deleted" : $0.kind.rawValue } }
        let items = found.items.compactMap { item in
            memberRef(item.device).map {
                RoleChange(folder: folder.id, path: item.path, kind: item.kind.rawValue, peer: $0,
                           theirs: describe(item.theirs), ours: describe(item.ours))
            }
        }
        return ListPage(items: items, next: found.more ? found.items.last?.path : nil)
    }

    /// `syncpeer override DIR`: our versions win at the members (see `SharedFolder.overrideHeld`).
    func overrideFolder(directory: String) throws(EngineError) -> GuardResult {
        let folder = try sharedFolder(at: directory)
        let localDevice = localDevice
        let result: Result<Int, EngineError> = folder.io.sync {
            do throws(EngineError) {
                do throws(IndexError) { try folder.loadPolicies(index: index) } catch { throw .index(error) }
                return .success(try folder.overrideHeld(localDevice: localDevice))
            } catch { return .failure(error) }
        }
        return GuardResult(folder: folder.id, path: folder.root, overridden: try result.get())
    }

    /// `syncpeer revert DIR` (see `SharedFolder.revertLocalChanges`).
    func revertFolder(directory: String) throws(EngineError) -> GuardResult {
        let folder = try sharedFolder(at: directory)
        let localDevice = localDevice
        let count: Result<Int, IndexError> = folder.io.sync {
            do throws(IndexError) { return .success(try folder.revertLocalChanges(localDevice: localDevice)) } catch { return .failure(error) }
        }
        do throws(IndexError) { return GuardResult(folder: folder.id, path: folder.root, reverted: try count.get()) } catch { throw .index(error) }
    }

    /// `syncpeer guard DIR [--percent P] [--files N]`: shows or sets the mass-change limits.
    func guardLimits(directory: String, percent: Int?, files: Int?) throws(EngineError) -> GuardResult {
        let folder = try sharedFolder(at: directory)
        if let percent, percent > 100 { throw .invalidArgument("--percent takes 0 to 100 (0: no share limit), not \(percent)") }
        do {
            var limits = try index.folderGuardLimits(folderID: folder.id)
            if percent != nil || files != nil {
                limits.percent = percent ?? limits.percent
                limits.files = files ?? limits.files
                try index.setFolderGuardLimits(folderID: folder.id, limits)
            }
            return GuardResult(folder: folder.id, path: folder.root, percent: limits.percent, files: limits.files)
        } catch { throw .index(error) }
    }

    /// The records of an index page that go to `device` (FolderRoles.sends). On `queue`.
    /// An index that cannot say throws (nothing is sent unfiltered).
    func roleFiltered(_ records: [FileRecord], folderID: String, to device: String) throws(IndexError) -> [FileRecord] {
        dispatchPrecondition(condition: .onQueue(queue))
        let stored = try index.folderPeerRoles(folderID: folderID)[device]
        guard let stored, stored.role == PeerRole.receiveOnly.rawValue else { return records }
        let policy = PeerPolicy(stored)
        return records.filter { FolderRoles.sends(modifiedBy: $0.modifiedBy, localDevice: localDevice, to: policy) }
    }
}
