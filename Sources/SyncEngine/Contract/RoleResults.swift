/// `role`: our role towards one member of a shared folder, as set now.
package struct RoleResult: Sendable, Equatable, Codable {
    package var folder: String
    package var path: String
    package var peer: PeerRef
    /// `both`, `send-only` or `receive-only`.
    package var role: String
    package var noDeletes: Bool
}

/// `changes`: one path where the roles keep the folder apart from a member.
package struct RoleChange: Sendable, Equatable, Codable {
    package var folder: String
    package var path: String
    /// `not-applied`: the peer's change, not applied here (send-only, no-deletes);
    /// `locally-changed`: our change, not sent to a receive-only peer.
    package var kind: String
    package var peer: PeerRef
    /// The peer's state: `deleted` for a tombstone, else its kind; nil when it has none.
    package var theirs: String?
    /// Ours, the same way.
    package var ours: String?
}

/// `override`, `guard`: what changed in a folder.
package struct GuardResult: Sendable, Equatable, Codable {
    package var folder: String
    package var path: String
    /// `guard`: the share of the folder's files (%) and the count a pull may delete or replace.
    package var percent: Int?
    package var files: Int?
    /// `override`: paths recorded again with our version on top, sent to the peers.
    package var overridden: Int?
    /// `revert`: locally changed paths put back to the cluster's version.
    package var reverted: Int?
}

/// `status`: a mass change of the peers' that the folder holds until the user answers.
package struct MassChangeInfo: Sendable, Equatable, Codable {
    /// Files the changes would delete or replace.
    package var affected: Int
    /// Live files the folder had.
    package var files: Int
    /// The question, in a line.
    package var question: String
}
