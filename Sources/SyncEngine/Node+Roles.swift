internal import Dispatch

/// Roles per peer per folder and the mass-change guard (issue 41 points 3 and 5), as the
/// Swift API and the control requests reach them; the work is FolderService+Roles.
extension Node {
    /// A role's name as typed (`both`, `send-only`, `receive-only`).
    static func peerRole(_ text: String) throws(EngineError) -> PeerRole {
        guard let role = PeerRole(rawValue: text) else {
            throw .invalidArgument("unknown role '\(text)': use both, send-only or receive-only")
        }
        return role
    }

    /// `syncpeer role DIR PEER [ROLE] [--no-deletes|--deletes]`: our role towards a member.
    package func setRole(directory: String, peer text: String, role: String?, noDeletes: Bool?) throws(EngineError) -> RoleResult {
        let role = try role.map(Self.peerRole)
        let resolved: Result<String, EngineError> = queue.sync {
            do throws(EngineError) { return .success(try resolve(text).deviceID.filter { $0 != "-" }) } catch { return .failure(error) }
        }
        return try folders.setRole(directory: directory, device: try resolved.get(), role: role, noDeletes: noDeletes)
    }

    /// `syncpeer changes DIR`: a page of the paths the roles keep apart.
    package func roleChanges(directory: String, page: PageRequest = .everything) throws(EngineError) -> ListPage<RoleChange> {
        try folders.roleChanges(directory: directory, page: page)
    }

    /// `syncpeer override DIR`: our versions win over the changes the roles or a held mass change keep out.
    package func overrideFolder(directory: String) throws(EngineError) -> GuardResult {
        try folders.overrideFolder(directory: directory)
    }

    /// `syncpeer revert DIR`: local changes kept back from receive-only peers are undone
    /// (each local file kept in the versions store first).
    package func revertFolder(directory: String) throws(EngineError) -> GuardResult {
        try folders.revertFolder(directory: directory)
    }

    /// `syncpeer guard DIR`: the mass-change limits, shown or set.
    package func guardLimits(directory: String, percent: Int?, files: Int?) throws(EngineError) -> GuardResult {
        try folders.guardLimits(directory: directory, percent: percent, files: files)
    }
}
