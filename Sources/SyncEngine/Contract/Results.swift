package import PeerCrypto

// The typed results of the control protocol's operations: what the engine returns, what
// the daemon sends as `result`, and what the CLI decodes and renders. Their JSON is
// documented field by field in docs/JSON.md (a test holds the two together). Optional
// fields that do not apply are left out. Times are milliseconds since 1970 (UTC).

/// A peer as results and events show it: its device ID and display name.
package struct PeerRef: Sendable, Hashable, Codable {
    package let id: DeviceID
    package let name: String

    package init(id: DeviceID, name: String) {
        self.id = id
        self.name = name
    }

    /// The first 7 characters of the device ID, as people quote it.
    package var shortID: String { id.shortID }
}

/// A session's state as the Multipeer-style API names it.
package enum SessionState: String, Sendable, Codable {
    case notConnected, connecting, connected
}

/// One entry of `peers`: a paired peer, a live session or a discovered node, merged by device.
package struct PeerSummary: Sendable, Equatable, Codable {
    package var peer: PeerRef
    package var paired: Bool
    package var state: SessionState
    /// Addresses stored for a paired peer (last used first).
    package var addresses: [String]
    /// The live session's or the discovered node's address.
    package var address: String?
    /// When a paired peer was last connected.
    package var lastSeen: Int64?
    /// Whether discovery sees it nearby now.
    package var discovered: Bool
    /// Its discovery instance name ("bob", "bob (2)") when nearby.
    package var instance: String?
    /// A paired peer's switches (`auto-accept PEER files|folders`); left out for others.
    package var autoAccept: Bool?
    package var autoAcceptFolders: Bool?
    /// How a live session reaches the peer: `direct HOST:PORT` or `relay HOST`.
    package var path: String?
    /// The live session's last measured round trip (keepalive ping to pong), milliseconds.
    package var roundTripMs: Double?
    /// What relays and global discovery servers call a paired peer (its certificate ID), once
    /// it told us in a session.
    package var certificateID: String?
}

/// An open invitation from a peer (`invitations`).
package struct InvitationInfo: Sendable, Equatable, Codable {
    package var invitation: String
    package var peer: PeerRef
    /// The short authentication code both ends show.
    package var code: String
    package var context: String?
    package var address: String
}

/// Discovery facts (`status`'s `discovery`, and the result of `visibility`).
package struct DiscoveryStatus: Sendable, Equatable, Codable {
    package var enabled: Bool
    package var visible: Bool?
    /// The instance name we are published under ("alice", or "alice (2)" after a clash).
    package var instance: String?
    package var serviceType: String?
    /// The interfaces discovery runs on; empty means every suitable one (automatic).
    package var interfaces: [String]?
}

/// The node (`status`).
package struct NodeStatus: Sendable, Equatable, Codable {
    package var id: DeviceID
    package var name: String
    /// Where accepted files and folders go.
    package var receiveDir: String
    package var listen: String
    package var pid: Int
    package var sessions: Int
    package var discovery: DiscoveryStatus
    /// Where peers can dial this node: `listen`, or for a wildcard listen address each
    /// interface address with the port (`ListenAddresses`); nil from an older daemon.
    package var addresses: [String]?
}

/// A nearby node found by discovery (`browse`).
package struct BrowsedPeer: Sendable, Equatable, Codable {
    package var peer: PeerRef
    /// The instance name ("bob", "bob (2)"), as in `found` events and `peers`.
    package var instance: String
    package var address: String?
    package var addresses: [String]
    package var port: Int
    package var info: [String: String]
    package var version: Int?
    package var paired: Bool
}

/// The result of an operation on one peer (`accept`/`decline` of an invitation, `pair`,
/// `disconnect`, `unpair`, `auto-accept`, `msg`).
package struct PeerResult: Sendable, Equatable, Codable {
    package var peer: PeerRef
    /// `auto-accept` (files): the new setting.
    package var autoAccept: Bool?
    /// `auto-accept ... folders`: the new setting.
    package var autoAcceptFolders: Bool?
    /// `msg`: the message's ID.
    package var id: UInt64?

    package init(peer: PeerRef, autoAccept: Bool? = nil, autoAcceptFolders: Bool? = nil, id: UInt64? = nil) {
        self.peer = peer
        self.autoAccept = autoAccept
        self.autoAcceptFolders = autoAcceptFolders
        self.id = id
    }
}

/// `resume`: how many transfers were offered again.
package struct ResumeResult: Sendable, Equatable, Codable {
    package var offered: Int
}

/// `share`: the folder and the peers it is offered to.
package struct ShareResult: Sendable, Equatable, Codable {
    package var folder: String
    package var label: String
    package var path: String
    package var peers: [PeerRef]
}

/// `unshare`, `confirm`, and the answer to a share offer (`accept`/`decline FOLDER-ID`).
package struct FolderResult: Sendable, Equatable, Codable {
    package var folder: String
    package var path: String?
    /// Answer to an offer: whether it was accepted.
    package var accepted: Bool?
    /// `confirm`: why the folder had stopped, if it had.
    package var stoppedBecause: String?
    /// `pause`, `resume-folder`: whether it is paused now.
    package var paused: Bool?
}

/// `folders`: one page of the shared folders and, on the first page, the first share offers
/// waiting for an answer (`offersNext` lists the rest, with `offers`).
package struct FoldersResult: Sendable, Equatable, Codable {
    /// How many share offers the first page of `folders` holds.
    package static let firstOffers = 20

    package var folders: [FolderStatus]
    package var offers: [ShareOfferInfo]
    /// While more offers wait: the `after` of the `offers` request that lists them.
    package var offersNext: String?

    package init(folders: [FolderStatus], offers: [ShareOfferInfo], offersNext: String? = nil) {
        self.folders = folders
        self.offers = offers
        self.offersNext = offersNext
    }
}

/// What a shared folder is doing (`state` of `status` and of `folder` events).
package enum FolderState: String, Sendable, Codable, CaseIterable {
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
package struct FolderStatus: Sendable, Equatable, Codable {
    package var folder: String
    package var label: String
    package var path: String
    package var state: FolderState
    package var error: String?
    package var files: Int
    package var bytes: Int64
    package var conflicts: Int
    package var peers: [FolderPeer]
    /// Files being pulled now.
    package var transfers: [FolderPull]
    package var reusedBytes: Int64
    package var scannedBytes: Int64
    /// Paths that cannot be pulled now (all), and the first of them with why.
    package var failing: Int
    package var failures: [PathFailure]
    /// Names that another name of their directory equals under Unicode normalization (both
    /// are synced byte-exact), and the first of them.
    package var normalizationTwins: Int = 0
    package var normalizationTwinNames: [String] = []
    /// A mass change of the peers' the folder holds until the user answers (`confirm`, `override`).
    package var massChange: MassChangeInfo?
    /// Paths where a send-only or no-deletes peer's change is not applied here ("remote
    /// changes not applied", `override`), and paths changed here that receive-only peers are
    /// not sent ("locally changed", `revert`); `syncpeer changes DIR` lists them. Counted up to
    /// `SharedFolder.roleCountLimit`.
    package var notApplied: Int = 0
    package var locallyChanged: Int = 0
    /// Files found damaged while serving them (bytes that no longer match the index under an
    /// unchanged size and mtime) and not repaired yet, and the first of them.
    package var damaged: Int = 0
    package var damagedPaths: [String] = []
    /// Bytes of files a member was still hashing, fetched before their index entry came and
    /// then taken by their pulls (`Prefetches`), since the daemon started.
    package var prefetchedBytes: Int64 = 0
}

/// What one member of a folder is missing, and what moved with it.
package struct FolderPeer: Sendable, Equatable, Codable {
    package var peer: PeerRef
    package var connected: Bool
    package var outOfSyncFiles: Int
    package var outOfSyncBytes: Int64
    package var percent: Int
    package var indexReceived: Bool
    package var receivedBytes: Int64
    package var sentBytes: Int64
    /// Our role towards it: `both`, `send-only`, `receive-only`.
    package var role = PeerRole.both.rawValue
    /// Its deletions are not applied here.
    package var noDeletes = false
    /// How its live session reaches it (`direct HOST:PORT`, `relay HOST`) and the last round
    /// trip measured on it, as `peers` says.
    package var path: String?
    package var roundTripMs: Double?
    /// The subtrees it says it holds (selective sync; the first 20 by path), over which
    /// `percent` is counted; empty: the whole folder.
    package var holds: [String] = []
}

/// A file being pulled into a folder.
package struct FolderPull: Sendable, Equatable, Codable {
    package var path: String
    package var size: Int64
    package var needed: Int64
    package var fetched: Int64
    package var percent: Int
    /// The peers it is pulled from.
    package var peers: [PeerRef]
}

/// A path that cannot be pulled now.
package struct PathFailure: Sendable, Equatable, Codable {
    package var path: String
    package var kind: String
    package var reason: String
    /// When it is tried again, in words.
    package var retry: String
}

/// A share offer waiting for an answer.
package struct ShareOfferInfo: Sendable, Equatable, Codable {
    package var folder: String
    package var label: String
    package var peer: PeerRef
    /// The path of our folder the peer asks to join, when we have it already.
    package var joins: String?
}

/// A conflicted file (`conflicts`): the file and every version of it, each named by the
/// device that wrote it.
package struct ConflictInfo: Sendable, Equatable, Codable {
    /// The folder's label.
    package var folder: String
    /// The file (absolute path): what `resolve` takes.
    package var original: String
    /// Versions past the first `listedVersions` (not listed), if any.
    package var moreVersions: Int?
    /// The file itself (if it exists) first, then its conflict copies, oldest first; at most
    /// `listedVersions` (a member could make thousands of copies of one file).
    package var versions: [ConflictVersion]

    package static let listedVersions = 100
}

/// One version of a conflicted file.
package struct ConflictVersion: Sendable, Equatable, Codable {
    /// Where it is (absolute): the file itself or a conflict copy.
    package var path: String
    /// The device that wrote it: its short ID (what `resolve --keep` takes, as does `name`).
    package var device: String
    /// That device's name ("?" when no paired peer has that ID).
    package var name: String
    /// Whether this device wrote it.
    package var local: Bool
    package var size: Int64
    /// Its modification time, ms since 1970.
    package var time: Int64
}

/// `rename`: this node's device ID and its new display name.
package struct RenameResult: Sendable, Equatable, Codable {
    package var id: DeviceID
    package var name: String
}

/// `ignores`: a folder's own ignore patterns (its root's `.syncpeerignore`).
package struct IgnoresResult: Sendable, Equatable, Codable {
    package var folder: String
    package var path: String
    package var patterns: String
}

/// `verify`: what a scrub of a folder found and repaired.
package struct VerifyResult: Sendable, Equatable, Codable {
    /// A file whose bytes did not match the index, repaired or not.
    package struct Damaged: Sendable, Equatable, Codable {
        package var path: String
        package var repaired: Bool
        /// Why it was not repaired.
        package var reason: String?
        /// Where the damaged file was kept before it was replaced (under the node's home).
        package var kept: String?
    }

    /// At most this many damaged files are listed (`corrupt` counts them all).
    package static let listLimit = 1_000

    package var folder: String
    package var path: String
    /// Files read and hashed, and their bytes.
    package var files: Int
    package var bytes: Int64
    package var seconds: Double
    /// Files found changed since the last scan (they are rescanned, not repaired).
    package var changed: Int
    /// Files whose bytes did not match their recorded chunks.
    package var corrupt: Int
    /// Of those, the ones rebuilt from verified chunks and a peer.
    package var repaired: Int
    /// The damaged files (the first `listLimit`), in path order.
    package var damaged: [Damaged]
    /// Versions of the folder this node held, read back and hashed (`VersionKeeper.scrub`).
    package var versions: Int = 0
    /// Of those, the ones found damaged (now listed as not held here).
    package var versionsDamaged: Int = 0
}

/// `resolve`: whose version was kept, the copies it settled, and where the dropped
/// versions went (the versions store: their IDs).
package struct ResolveResult: Sendable, Equatable, Codable {
    package var path: String
    /// "both", or the short device ID of the device whose version is now at `path`.
    package var kept: String
    /// That device's name (nil for "both").
    package var name: String?
    package var copies: [String]
    /// The dropped versions' IDs in the versions store (as `history` lists them).
    package var versions: [String]
    /// How to get one back (`syncpeer restore PATH --version ID`); nil when none was dropped.
    package var restore: String?

    package init(path: String, kept: String, name: String? = nil, copies: [String], versions: [String], restore: String? = nil) {
        (self.path, self.kept, self.name, self.copies, self.versions, self.restore) = (path, kept, name, copies, versions, restore)
    }
}

/// A byte stream that ended complete (`stream-send`, `stream-receive`; `send -`,
/// `receive --stdout`). A cut stream is an error (`streamCut`), never this.
package struct StreamResult: Sendable, Equatable, Codable {
    package var peer: PeerRef
    /// The stream's name (`--name`).
    package var name: String
    /// Bytes written to (or read from) the stream.
    package var bytes: Int64

    package init(peer: PeerRef, name: String, bytes: Int64) {
        self.peer = peer
        self.name = name
        self.bytes = bytes
    }
}
