/// `role`: our role towards one member of a shared folder, as set now.
public struct RoleResult: Sendable, Equatable, Codable {
    public var folder: String
    public var path: String
    public var peer: PeerRef
    /// `both`, `send-only` or `receive-only`.
    public var role: String
    public var noDeletes: Bool
}

/// `changes`: one path where the roles keep the folder apart from a member.
public struct RoleChange: Sendable, Equatable, Codable {
    public var folder: String
    public var path: String
    /// `not-applied`: the peer's change, not applied here (send-only, no-deletes);
    /// `locally-changed`: our change, not sent to a receive-only peer.
    public var kind: String
    public var peer: PeerRef
    /// The peer's state: `deleted` for a tombstone, else its kind; nil when it has none.
    public var theirs: String?
    /// Ours, the same way.
    public var ours: String?
}

/// `override`, `guard`: what changed in a folder.
public struct GuardResult: Sendable, Equatable, Codable {
    public var folder: String
    public var path: String
    /// `guard`: the share of the folder's files (%) and the count a pull may delete or replace.
    public var percent: Int?
    public var files: Int?
    /// `override`: paths recorded again with our version on top, sent to the peers.
    public var overridden: Int?
    /// `revert`: locally changed paths put back to the cluster's version.
    public var reverted: Int?
}

/// `status`: a mass change of the peers' that the folder holds until the user answers.
public struct MassChangeInfo: Sendable, Equatable, Codable {
    /// Files the changes would delete or replace.
    public var affected: Int
    /// Live files the folder had.
    public var files: Int
    /// The question, in a line.
    public var question: String
}
