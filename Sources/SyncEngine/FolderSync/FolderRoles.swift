package import PeerModel
internal import PeerIndex

/// Our role towards one peer in one shared folder (`syncpeer share --role`, `syncpeer role`).
package enum PeerRole: String, Sendable, CaseIterable, Codable {
    /// Changes go both ways (the default).
    case both
    /// Our changes go to the peer; none of its changes is applied here ("remote changes not applied").
    case sendOnly = "send-only"
    /// The peer's changes are applied here; our local changes are not sent to it ("locally changed").
    case receiveOnly = "receive-only"
}

/// What this node lets one peer do in one folder: its role, and whether its deletions apply.
package struct PeerPolicy: Sendable, Hashable {
    package var role: PeerRole
    /// The peer's deletions are not applied here (an archive).
    package var noDeletes: Bool

    package init(role: PeerRole = .both, noDeletes: Bool = false) {
        self.role = role
        self.noDeletes = noDeletes
    }

    /// From the index (an unknown stored role reads as the strictest that still syncs out: send-only).
    init(_ stored: FolderPeerRole) {
        self.init(role: PeerRole(rawValue: stored.role) ?? .sendOnly, noDeletes: stored.noDeletes)
    }

    var stored: FolderPeerRole { FolderPeerRole(role: role.rawValue, noDeletes: noDeletes) }
}

/// The role rules, enforced on this node whatever a peer claims: no role travels on the wire.
///
///     peer's index entry ─▶ stored as sent ─▶ plan: `admitted` drops what the roles refuse ─▶ SyncPlanner
///     local record ─▶ index page for a peer: `sends` drops our own changes for a receive-only peer
///
/// A peer's state is judged by who sent it and by who made the change (`modifiedBy`): a
/// change a send-only peer made is not taken from a third peer that forwarded it either,
/// and a hostile peer that claims another author is still refused as the sender. Pure.
package enum FolderRoles {
    /// Whether the state `sender` has of a path may be planned here.
    package static func admits(_ state: FileEntry, from sender: String, policies: [String: PeerPolicy]) -> Bool {
        for device in Set([sender, state.modifiedBy]) {
            let policy = policies[device] ?? PeerPolicy()
            if policy.role == .sendOnly { return false }
            if policy.noDeletes && state.deleted { return false }
        }
        return true
    }

    /// The peers' states of one path split into what is planned and what the roles hold back.
    package static func split(_ remotes: [String: FileEntry], policies: [String: PeerPolicy])
        -> (admitted: [String: FileEntry], held: [String: FileEntry]) {
        var admitted: [String: FileEntry] = [:], held: [String: FileEntry] = [:]
        for (device, state) in remotes {
            if admits(state, from: device, policies: policies) { admitted[device] = state } else { held[device] = state }
        }
        return (admitted, held)
    }

    /// Whether a held state is a change we have not taken ("remote change not applied"): it
    /// is not dominated by the local version (a state we already have or superseded is not).
    package static func notApplied(_ held: FileEntry, local: FileEntry?) -> Bool {
        guard !held.version.isEmpty else { return false }
        guard let local else { return !held.deleted }
        return !local.version.dominates(held.version)
    }

    /// Whether a local record goes to `peer` in our index: for a receive-only peer, records
    /// of our own changes stay here ("locally changed").
    package static func sends(modifiedBy: String, localDevice: String, to policy: PeerPolicy) -> Bool {
        policy.role != .receiveOnly || modifiedBy != localDevice
    }

    /// `syncpeer override`: the local state recorded again with a version that dominates
    /// every held state, so that ours wins at the peers (one more change of ours on top).
    package static func override(_ local: FileEntry, over held: [FileEntry], localDevice: String) -> FileEntry {
        let merged = held.reduce(local.version) { $0.merged(with: $1.version) }
        var state = local.with(version: merged.incremented(for: localDevice))
        state.modifiedBy = localDevice
        return state
    }

    /// Whether a local record is a local change a receive-only peer has not taken: ours,
    /// and not dominated by what that peer has.
    package static func locallyChanged(_ local: FileEntry, peer: FileEntry?, localDevice: String) -> Bool {
        guard local.modifiedBy == localDevice else { return false }
        guard let peer else { return !local.deleted }
        return !peer.version.dominates(local.version)
    }
}
