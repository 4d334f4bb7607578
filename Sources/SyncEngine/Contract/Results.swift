public import PeerCrypto

// The typed results of the control protocol's operations: what the engine returns, what
// the daemon sends as `result`, and what the CLI decodes and renders. Their JSON is
// documented field by field in docs/JSON.md (a test holds the two together). Optional
// fields that do not apply are left out. Times are milliseconds since 1970 (UTC).

/// A peer as results and events show it: its device ID and display name.
public struct PeerRef: Sendable, Hashable, Codable {
    public let id: DeviceID
    public let name: String

    public init(id: DeviceID, name: String) {
        self.id = id
        self.name = name
    }

    /// The first 7 characters of the device ID, as people quote it.
    public var shortID: String { id.shortID }
}

/// A session's state as the Multipeer-style API names it.
public enum SessionState: String, Sendable, Codable {
    case notConnected, connecting, connected
}

/// One entry of `peers`: a paired peer, a live session or a discovered node, merged by device.
public struct PeerSummary: Sendable, Equatable, Codable {
    public var peer: PeerRef
    public var paired: Bool
    public var state: SessionState
    /// Addresses stored for a paired peer (last used first).
    public var addresses: [String]
    /// The live session's or the discovered node's address.
    public var address: String?
    /// When a paired peer was last connected.
    public var lastSeen: Int64?
    /// Whether discovery sees it nearby now.
    public var discovered: Bool
    /// Its discovery instance name ("bob", "bob (2)") when nearby.
    public var instance: String?
    /// A paired peer's switches (`auto-accept PEER files|folders`); left out for others.
    public var autoAccept: Bool?
    public var autoAcceptFolders: Bool?
    /// How a live session reaches the peer: `direct HOST:PORT` or `relay HOST`.
    public var path: String?
    /// The live session's last measured round trip (keepalive ping to pong), milliseconds.
    public var roundTripMs: Double?
    /// What relays and global discovery servers call a paired peer (its certificate ID), once
    /// it told us in a session.
    public var certificateID: String?
}

/// An open invitation from a peer (`invitations`).
public struct InvitationInfo: Sendable, Equatable, Codable {
    public var invitation: String
    public var peer: PeerRef
    /// The short authentication code both ends show.
    public var code: String
    public var context: String?
    public var address: String
}

/// Discovery facts (`status`'s `discovery`, and the result of `visibility`).
public struct DiscoveryStatus: Sendable, Equatable, Codable {
    public var enabled: Bool
    public var visible: Bool?
    /// The instance name we are published under ("alice", or "alice (2)" after a clash).
    public var instance: String?
    public var serviceType: String?
    /// The interfaces discovery runs on; empty means every suitable one (automatic).
    public var interfaces: [String]?
}

/// The node (`status`).
public struct NodeStatus: Sendable, Equatable, Codable {
    public var id: DeviceID
    public var name: String
    /// Where accepted files and folders go.
    public var receiveDir: String
    public var listen: String
    public var pid: Int
    public var sessions: Int
    public var discovery: DiscoveryStatus
    /// Where peers can dial this node: `listen`, or for a wildcard listen address each
    /// interface address with the port (`ListenAddresses`); nil from an older daemon.
    public var addresses: [String]?
}

/// A nearby node found by discovery (`browse`).
public struct BrowsedPeer: Sendable, Equatable, Codable {
    public var peer: PeerRef
    /// The instance name ("bob", "bob (2)"), as in `found` events and `peers`.
    public var instance: String
    public var address: String?
    public var addresses: [String]
    public var port: Int
    public var info: [String: String]
    public var version: Int?
    public var paired: Bool
}

/// The result of an operation on one peer (`accept`/`decline` of an invitation, `pair`,
/// `disconnect`, `unpair`, `auto-accept`, `msg`).
public struct PeerResult: Sendable, Equatable, Codable {
    public var peer: PeerRef
    /// `auto-accept` (files): the new setting.
    public var autoAccept: Bool?
    /// `auto-accept ... folders`: the new setting.
    public var autoAcceptFolders: Bool?
    /// `msg`: the message's ID.
    public var id: UInt64?

    public init(peer: PeerRef, autoAccept: Bool? = nil, autoAcceptFolders: Bool? = nil, id: UInt64? = nil) {
        self.peer = peer
        self.autoAccept = autoAccept
        self.autoAcceptFolders = autoAcceptFolders
        self.id = id
    }
}

/// `resume`: how many transfers were offered again.
public struct ResumeResult: Sendable, Equatable, Codable {
    public var offered: Int
}

/// `share`: the folder and the peers it is offered to.
public struct ShareResult: Sendable, Equatable, Codable {
    public var folder: String
    public var label: String
    public var path: String
    public var peers: [PeerRef]
}

/// `unshare`, `confirm`, and the answer to a share offer (`accept`/`decline FOLDER-ID`).
public struct FolderResult: Sendable, Equatable, Codable {
    public var folder: String
    public var path: String?
    /// Answer to an offer: whether it was accepted.
    public var accepted: Bool?
    /// `confirm`: why the folder had stopped, if it had.
    public var stoppedBecause: String?
    /// `pause`, `resume-folder`: whether it is paused now.
    public var paused: Bool?
}

/// `folders`: one page of the shared folders and, on the first page, the first share offers
/// waiting for an answer (`offersNext` lists the rest, with `offers`).
public struct FoldersResult: Sendable, Equatable, Codable {
    /// How many share offers the first page of `folders` holds.
    public static let firstOffers = 20

    public var folders: [FolderStatus]
    public var offers: [ShareOfferInfo]
    /// While more offers wait: the `after` of the `offers` request that lists them.
    public var offersNext: String?

    public init(folders: [FolderStatus], offers: [ShareOfferInfo], offersNext: String? = nil) {
        self.folders = folders
        self.offers = offers
        self.offersNext = offersNext
    }
}

/// What a shared folder is doing (`state` of `status` and of `folder` events).
public enum FolderState: String, Sendable, Codable, CaseIterable {
    case scanning, syncing, idle
    /// Some paths cannot be pulled now and are tried again by themselves.
    case retrying
    /// Stopped (see its error), or paths that wait for a change.
    case error
    /// Paused by the user (`syncpeer pause`): neither scanned nor pulled until resumed.
    case paused
    /// Events only: the folder was shared with us, or a member left it.
    case shared, unshared
}

/// One shared folder's state (`folders`, `syncpeer status`).
public struct FolderStatus: Sendable, Equatable, Codable {
    public var folder: String
    public var label: String
    public var path: String
    public var state: FolderState
    public var error: String?
    public var files: Int
    public var bytes: Int64
    public var conflicts: Int
    public var peers: [FolderPeer]
    /// Files being pulled now.
    public var transfers: [FolderPull]
    public var reusedBytes: Int64
    public var scannedBytes: Int64
    /// Paths that cannot be pulled now (all), and the first of them with why.
    public var failing: Int
    public var failures: [PathFailure]
    /// Names that another name of their directory equals under Unicode normalization (both
    /// are synced byte-exact), and the first of them.
    public var normalizationTwins: Int = 0
    public var normalizationTwinNames: [String] = []
    /// A mass change of the peers' the folder holds until the user answers (`confirm`, `override`).
    public var massChange: MassChangeInfo?
    /// Paths where a send-only or no-deletes peer's change is not applied here ("remote
    /// changes not applied", `override`), and paths changed here that receive-only peers are
    /// not sent ("locally changed", `revert`); `syncpeer changes DIR` lists them. Counted up to
    /// `SharedFolder.roleCountLimit`.
    public var notApplied: Int = 0
    public var locallyChanged: Int = 0
}

/// What one member of a folder is missing, and what moved with it.
public struct FolderPeer: Sendable, Equatable, Codable {
    public var peer: PeerRef
    public var connected: Bool
    public var outOfSyncFiles: Int
    public var outOfSyncBytes: Int64
    public var percent: Int
    public var indexReceived: Bool
    public var receivedBytes: Int64
    public var sentBytes: Int64
    /// Our role towards it: `both`, `send-only`, `receive-only`.
    public var role = PeerRole.both.rawValue
    /// Its deletions are not applied here.
    public var noDeletes = false
    /// How its live session reaches it (`direct HOST:PORT`, `relay HOST`) and the last round
    /// trip measured on it, as `peers` says.
    public var path: String?
    public var roundTripMs: Double?
    /// The subtrees it says it holds (selective sync; the first 20 by path), over which
    /// `percent` is counted; empty: the whole folder.
    public var holds: [String] = []
}

/// A file being pulled into a folder.
public struct FolderPull: Sendable, Equatable, Codable {
    public var path: String
    public var size: Int64
    public var needed: Int64
    public var fetched: Int64
    public var percent: Int
    /// The peers it is pulled from.
    public var peers: [PeerRef]
}

/// A path that cannot be pulled now.
public struct PathFailure: Sendable, Equatable, Codable {
    public var path: String
    public var kind: String
    public var reason: String
    /// When it is tried again, in words.
    public var retry: String
}

/// A share offer waiting for an answer.
public struct ShareOfferInfo: Sendable, Equatable, Codable {
    public var folder: String
    public var label: String
    public var peer: PeerRef
    /// The path of our folder the peer asks to join, when we have it already.
    public var joins: String?
}

/// A conflicted file (`conflicts`): the file and every version of it, each named by the
/// device that wrote it.
public struct ConflictInfo: Sendable, Equatable, Codable {
    /// The folder's label.
    public var folder: String
    /// The file (absolute path): what `resolve` takes.
    public var original: String
    /// Versions past the first `listedVersions` (not listed), if any.
    public var moreVersions: Int?
    /// The file itself (if it exists) first, then its conflict copies, oldest first; at most
    /// `listedVersions` (a member could make thousands of copies of one file).
    public var versions: [ConflictVersion]

    public static let listedVersions = 100
}

/// One version of a conflicted file.
public struct ConflictVersion: Sendable, Equatable, Codable {
    /// Where it is (absolute): the file itself or a conflict copy.
    public var path: String
    /// The device that wrote it: its short ID (what `resolve --keep` takes, as does `name`).
    public var device: String
    /// That device's name ("?" when no paired peer has that ID).
    public var name: String
    /// Whether this device wrote it.
    public var local: Bool
    public var size: Int64
    /// Its modification time, ms since 1970.
    public var time: Int64
}

/// `rename`: this node's device ID and its new display name.
public struct RenameResult: Sendable, Equatable, Codable {
    public var id: DeviceID
    public var name: String
}

/// `ignores`: a folder's own ignore patterns (its root's `.syncpeerignore`).
public struct IgnoresResult: Sendable, Equatable, Codable {
    public var folder: String
    public var path: String
    public var patterns: String
}

/// `verify`: what a scrub of a folder found and repaired.
public struct VerifyResult: Sendable, Equatable, Codable {
    /// A file whose bytes did not match the index, repaired or not.
    public struct Damaged: Sendable, Equatable, Codable {
        public var path: String
        public var repaired: Bool
        /// Why it was not repaired.
        public var reason: String?
        /// Where the damaged file was kept before it was replaced (under the node's home).
        public var kept: String?
    }

    /// At most this many damaged files are listed (`corrupt` counts them all).
    public static let listLimit = 1_000

    public var folder: String
    public var path: String
    /// Files read and hashed, and their bytes.
    public var files: Int
    public var bytes: Int64
    public var seconds: Double
    /// Files found changed since the last scan (they are rescanned, not repaired).
    public var changed: Int
    /// Files whose bytes did not match their recorded chunks.
    public var corrupt: Int
    /// Of those, the ones rebuilt from verified chunks and a peer.
    public var repaired: Int
    /// The damaged files (the first `listLimit`), in path order.
    public var damaged: [Damaged]
}

/// `resolve`: whose version was kept, the copies it settled, and where the dropped
/// versions went (the versions store: their IDs).
public struct ResolveResult: Sendable, Equatable, Codable {
    public var path: String
    /// "both", or the short device ID of the device whose version is now at `path`.
    public var kept: String
    /// That device's name (nil for "both").
    public var name: String?
    public var copies: [String]
    /// The dropped versions' IDs in the versions store (as `history` lists them).
    public var versions: [String]
    /// How to get one back (`syncpeer restore PATH --version ID`); nil when none was dropped.
    public var restore: String?

    public init(path: String, kept: String, name: String? = nil, copies: [String], versions: [String], restore: String? = nil) {
        (self.path, self.kept, self.name, self.copies, self.versions, self.restore) = (path, kept, name, copies, versions, restore)
    }
}

/// A byte stream that ended complete (`stream-send`, `stream-receive`; `send -`,
/// `receive --stdout`). A cut stream is an error (`streamCut`), never this.
public struct StreamResult: Sendable, Equatable, Codable {
    public var peer: PeerRef
    /// The stream's name (`--name`).
    public var name: String
    /// Bytes written to (or read from) the stream.
    public var bytes: Int64

    public init(peer: PeerRef, name: String, bytes: Int64) {
        self.peer = peer
        self.name = name
        self.bytes = bytes
    }
}
