package import PeerNet

/// One request of the control protocol (see docs/PROTOCOL.md, "Control socket"): what the
/// CLI asks a daemon. On the wire it is one JSON object, `{"id":…,"op":…, arguments}`;
/// `init(json:)` checks it and `json` writes it, so the client and the server cannot
/// disagree on names.
package enum ControlRequest: Sendable, Equatable {
    case status
    case peers
    case invitations
    case browse
    /// Changes this node's display name.
    case rename(name: String)
    /// Changes where accepted files and folders go.
    case receiveDir(directory: String)
    /// Shows (true) or hides (false) the node, or only reports (nil).
    case visibility(visible: Bool?)
    /// Invites a nearby node (name, device ID prefix) or HOST:PORT.
    case pair(address: String, context: String?)
    case answerInvitation(invitation: String, accept: Bool)
    /// Accepts or declines an offer of files; with `follow`, the answer comes when it ends.
    case answerOffer(transfer: String, accept: Bool, directory: String?, follow: Bool)
    case answerShare(folder: String, accept: Bool, directory: String?)
    /// Sends to one peer. Unless `detach`, the transfer belongs to the client: when its
    /// connection goes away (Ctrl-C), the transfer is cancelled. With `detach` the answer
    /// comes once the transfer has its ID, and the daemon carries on with it.
    case send(path: String, peer: String, name: String?, spool: String?, detach: Bool = false)
    /// Waits for the next offer and accepts (or declines) it.
    case receive(directory: String?, accept: Bool)
    /// Shares a folder; `role` (`both`, `send-only`, `receive-only`) and `noDeletes` apply to
    /// each of `peers` (nil: a member keeps its role; a new one is `both`).
    case share(directory: String, peers: [String], role: String? = nil, noDeletes: Bool? = nil, only: [String]? = nil)
    case unshare(directory: String)
    case confirm(directory: String)
    case verify(directory: String)
    /// Scans a shared folder now, or only `path` in it (relative to its root).
    case rescan(directory: String, path: String?)
    /// Pauses (true) or resumes (false) a shared folder: `pause`, `resume-folder`.
    case pauseFolder(directory: String, paused: Bool)
    /// A shared folder's own ignore patterns; with `patterns`, replaces them.
    case ignores(directory: String, patterns: String?)
    case folders
    /// Share offers waiting for an answer (the rest of those `folders` shows the first of).
    case offers
    case conflicts
    /// Keeps one device's version of a conflicted file (a name, a device ID prefix, `local`,
    /// `remote`), or `both`: `ConflictChoice`.
    case resolve(path: String, keep: String)
    case transfers
    case cancel(transfer: String)
    case resume(transfer: String?)
    case message(peer: String, text: String)
    case disconnect(peer: String)
    /// Connects to a paired peer now (undoes `disconnect`).
    case connect(peer: String)
    case unpair(peer: String)
    /// Accepts a peer's offers of files without asking, or (`folders`) its shared folders:
    /// two switches, folders off unless turned on.
    case autoAccept(peer: String, on: Bool, folders: Bool = false)
    /// Accepts a share offer holding only the subtrees `only` (`accept FOLDER --only`): op
    /// `accept` with `"only"`, the selection stored before the folder's first pull.
    case acceptSelected(folder: String, directory: String?, only: [String])
    /// A folder's selection (`select`); with `paths`, holds only those subtrees here (an
    /// empty list: the whole folder again).
    case select(directory: String, paths: [String]?)
    /// The cluster's tree of a folder below `path` (the root when nil), one level, paged.
    case tree(directory: String, path: String?)
    /// Streams every event until the client disconnects.
    case events
    /// The last events the daemon kept (at most 1,000, newest first; a list).
    case activity
    /// Writes what the descriptor passed with the request (`SCM_RIGHTS`) reads, as the
    /// byte stream `name`, to a peer, until its end (live: nothing is spooled).
    case streamSend(peer: String, name: String)
    /// Waits for the next stream a peer opens (from `peer`, if given) and writes it to the
    /// descriptor passed with the request.
    case streamReceive(peer: String?)
    /// Versions of a path in a shared folder (and under it) known here and on connected peers.
    case history(path: String)
    /// Brings a version back: the one current at `at` (unix ms), the version `version`, or
    /// the newest; at its path or at `to`.
    case restore(path: String, at: Int64?, version: String?, to: String?)
    /// A shared folder's versions policy; with `policy`, sets it.
    case versions(directory: String, policy: String?)
    /// Our role towards one member of a folder; nil keeps that part as it is.
    case role(directory: String, peer: String, role: String?, noDeletes: Bool?)
    /// Paths where the roles keep the folder apart from its members (a list).
    case roleChanges(directory: String)
    /// Our versions win over the changes the roles (or a held mass change) keep out.
    case override(directory: String)
    /// Local changes kept back from receive-only peers take the cluster's version again.
    case revert(directory: String)
    /// The folder's mass-change guard; nil keeps that limit as it is.
    case guardLimits(directory: String, percent: Int?, files: Int?)
    /// Pairs with the node holding `key` (hex of its X25519 identity key), told by `pair --code`
    /// through a wormhole: no invitation, no 6-digit comparison; `addresses` are where to dial it.
    case pairKey(key: String, name: String, addresses: [String])

    /// The `op` names, one per operation of the protocol.
    package enum Op: String, Sendable, CaseIterable {
        case status, rename, receiveDir = "receive-dir", peers, invitations, browse, visibility, pair, accept, decline, send, receive
        case share, unshare, confirm, verify, rescan, ignores, pause, resumeFolder = "resume-folder", folders, offers, conflicts, resolve, transfers, cancel, resume, msg
        case disconnect, connect, unpair, autoAccept = "auto-accept", events, activity
        case streamSend = "stream-send", streamReceive = "stream-receive"
        case select, tree
        case history, restore, versions
        case role, changes, override, guardLimits = "guard", revert
        case pairKey = "pair-key"
    }

    package var op: Op {
        switch self {
        case .status: .status
        case .peers: .peers
        case .invitations: .invitations
        case .browse: .browse
        case .rename: .rename
        case .receiveDir: .receiveDir
        case .visibility: .visibility
        case .pair: .pair
        case let .answerInvitation(_, accept), let .answerOffer(_, accept, _, _), let .answerShare(_, accept, _):
            accept ? .accept : .decline
        case .send: .send
        case .receive: .receive
        case .share: .share
        case .unshare: .unshare
        case .confirm: .confirm
        case .verify: .verify
        case .rescan: .rescan
        case .ignores: .ignores
        case let .pauseFolder(_, paused): paused ? .pause : .resumeFolder
        case .folders: .folders
        case .offers: .offers
        case .conflicts: .conflicts
        case .resolve: .resolve
        case .transfers: .transfers
        case .cancel: .cancel
        case .resume: .resume
        case .message: .msg
        case .disconnect: .disconnect
        case .connect: .connect
        case .unpair: .unpair
        case .autoAccept: .autoAccept
        case .events: .events
        case .activity: .activity
        case .streamSend: .streamSend
        case .streamReceive: .streamReceive
        case .acceptSelected: .accept
        case .select: .select
        case .tree: .tree
        case .history: .history
        case .restore: .restore
        case .versions: .versions
        case .role: .role
        case .roleChanges: .changes
        case .override: .override
        case .revert: .revert
        case .guardLimits: .guardLimits
        case .pairKey: .pairKey
        }
    }

    /// Whether the request carries a descriptor (passed with its line).
    package var passesDescriptor: Bool { op == .streamSend || op == .streamReceive }

    /// The request's arguments (everything but `id` and `op`).
    package var arguments: [String: JSONValue] {
        var a: [String: JSONValue] = [:]
        func put(_ key: String, _ value: String?) { if let value { a[key] = .string(value) } }
        switch self {
        case .status, .peers, .invitations, .browse, .folders, .offers, .conflicts, .transfers, .events, .activity:
            break
        case let .visibility(visible):
            if let visible { a["visible"] = .bool(visible) }
        case let .rename(name):
            put("name", name)
        case let .receiveDir(directory):
            put("dir", directory)
        case let .pair(address, context):
            put("address", address)
            put("context", context)
        case let .answerInvitation(invitation, _):
            put("invitation", invitation)
        case let .answerOffer(transfer, _, directory, follow):
            put("transfer", transfer)
            put("dir", directory)
            a["follow"] = .bool(follow)
        case let .answerShare(folder, _, directory):
            put("folder", folder)
            put("dir", directory)
        case let .send(path, peer, name, spool, detach):
            put("path", path)
            put("peer", peer)
            put("name", name)
            put("spool", spool)
            if detach { a["detach"] = .bool(true) }
        case let .receive(directory, accept):
            put("dir", directory)
            a["decline"] = .bool(!accept)
        case let .share(directory, peers, role, noDeletes, only):
            put("dir", directory)
            a["peers"] = .array(peers.map { .string($0) })
            put("role", role)
            if let noDeletes { a["noDeletes"] = .bool(noDeletes) }
            if let only { a["only"] = .array(only.map { .string($0) }) }
        case let .unshare(directory), let .confirm(directory), let .verify(directory):
            put("dir", directory)
        case let .rescan(directory, path):
            put("dir", directory)
            put("path", path)
        case let .ignores(directory, patterns):
            put("dir", directory)
            put("patterns", patterns)
        case let .acceptSelected(folder, directory, only):
            put("folder", folder)
            put("dir", directory)
            a["only"] = .array(only.map { .string($0) })
        case let .select(directory, paths):
            put("dir", directory)
            if let paths { a["paths"] = .array(paths.map { .string($0) }) }
        case let .tree(directory, path):
            put("dir", directory)
            put("path", path)
        case let .pauseFolder(directory, _):
            put("dir", directory)
        case let .resolve(path, keep):
            put("path", path)
            put("keep", keep)
        case let .cancel(transfer):
            put("transfer", transfer)
        case let .resume(transfer):
            put("transfer", transfer)
        case let .message(peer, text):
            put("peer", peer)
            put("text", text)
        case let .disconnect(peer), let .unpair(peer), let .connect(peer):
            put("peer", peer)
        case let .autoAccept(peer, on, folders):
            put("peer", peer)
            a["on"] = .bool(on)
            put("what", folders ? "folders" : "files")
        case let .streamSend(peer, name):
            put("peer", peer)
            put("name", name)
        case let .streamReceive(peer):
            put("peer", peer)
        case let .history(path):
            put("path", path)
        case let .restore(path, at, version, to):
            put("path", path)
            if let at { a["at"] = JSONValue(Int(at)) }
            put("version", version)
            put("to", to)
        case let .versions(directory, policy):
            put("dir", directory)
            put("policy", policy)
        case let .role(directory, peer, role, noDeletes):
            put("dir", directory)
            put("peer", peer)
            put("role", role)
            if let noDeletes { a["noDeletes"] = .bool(noDeletes) }
        case let .roleChanges(directory), let .override(directory), let .revert(directory):
            put("dir", directory)
        case let .guardLimits(directory, percent, files):
            put("dir", directory)
            if let percent { a["percent"] = JSONValue(percent) }
            if let files { a["files"] = JSONValue(files) }
        case let .pairKey(key, name, addresses):
            put("key", key)
            put("name", name)
            a["addresses"] = .array(addresses.map { .string($0) })
        }
        return a
    }

    /// Whether the answer is a list, answered a page at a time (`PageRequest`).
    package var isPaged: Bool {
        switch self {
        case .peers, .invitations, .browse, .folders, .offers, .conflicts, .transfers, .activity, .tree, .roleChanges: true
        default: false
        }
    }

    /// The request as a line's object, with `id` (and, for a list, which page).
    package func json(id: Int, page: PageRequest? = nil) -> JSONValue {
        var object = arguments
        if isPaged, let page { page.add(to: &object) }
        object["op"] = .string(op.rawValue)
        object["id"] = JSONValue(id)
        return .object(object)
    }

    /// Reads a request object; a missing or mistyped argument is a usage error naming it.
    package init(json request: JSONValue) throws(EngineError) {
        guard case .object = request, let name = request["op"]?.stringValue else {
            throw .invalidArgument("a request must be a JSON object with an \"op\"")
        }
        guard let op = Op(rawValue: name) else { throw .invalidArgument("unknown op '\(name)'") }
        func string(_ key: String) throws(EngineError) -> String {
            guard let value = request[key]?.stringValue else { throw .invalidArgument("'\(name)' needs \"\(key)\"") }
            return value
        }
        func optional(_ key: String) throws(EngineError) -> String? {
            guard let value = request[key], value != .null else { return nil }
            guard let text = value.stringValue else { throw .invalidArgument("'\(name)': \"\(key)\" must be a string") }
            return text
        }
        func strings(_ key: String) throws(EngineError) -> [String]? {
            guard let value = request[key], value != .null else { return nil }
            guard let list = value.arrayValue, case let texts = list.compactMap(\.stringValue), texts.count == list.count else {
                throw .invalidArgument("'\(name)': \"\(key)\" must be a list of strings")
            }
            return texts
        }
        func flag(_ key: String) throws(EngineError) -> Bool? {
            guard let value = request[key], value != .null else { return nil }
            guard let flag = value.boolValue else { throw .invalidArgument("'\(name)' takes \"\(key)\": true or false") }
            return flag
        }
        switch op {
        case .status: self = .status
        case .peers: self = .peers
        case .invitations: self = .invitations
        case .browse: self = .browse
        case .folders: self = .folders
        case .offers: self = .offers
        case .conflicts: self = .conflicts
        case .transfers: self = .transfers
        case .events: self = .events
        case .activity: self = .activity
        case .visibility: self = .visibility(visible: try flag("visible"))
        case .rename: self = .rename(name: try string("name"))
        case .receiveDir: self = .receiveDir(directory: try string("dir"))
        case .pair: self = .pair(address: try string("address"), context: try optional("context"))
        case .accept, .decline:
            let accept = op == .accept
            if let folder = try optional("folder") {
                if accept, let only = try strings("only") {
                    guard !only.isEmpty else { throw .invalidArgument("'accept': \"only\" needs at least one path") }
                    self = .acceptSelected(folder: folder, directory: try optional("dir"), only: only)
                } else {
                    self = .answerShare(folder: folder, accept: accept, directory: try optional("dir"))
                }
            } else if let transfer = try optional("transfer") {
                self = .answerOffer(transfer: transfer, accept: accept, directory: try optional("dir"),
                                    follow: try flag("follow") ?? false)
            } else {
                self = .answerInvitation(invitation: try string("invitation"), accept: accept)
            }
        case .send:
            self = .send(path: try string("path"), peer: try string("peer"), name: try optional("name"), spool: try optional("spool"),
                         detach: try flag("detach") ?? false)
        case .receive: self = .receive(directory: try optional("dir"), accept: try flag("decline") != true)
        case .share:
            guard let list = request["peers"]?.arrayValue, !list.isEmpty else { throw .invalidArgument("'share' needs at least one peer") }
            let peers = list.compactMap(\.stringValue)
            guard peers.count == list.count else { throw .invalidArgument("'share': \"peers\" must be a list of strings") }
            let only = try strings("only")
            if let only, only.isEmpty { throw .invalidArgument("'share': \"only\" needs at least one path") }
            self = .share(directory: try string("dir"), peers: peers, role: try optional("role"), noDeletes: try flag("noDeletes"), only: only)
        case .unshare: self = .unshare(directory: try string("dir"))
        case .confirm: self = .confirm(directory: try string("dir"))
        case .verify: self = .verify(directory: try string("dir"))
        case .rescan: self = .rescan(directory: try string("dir"), path: try optional("path"))
        case .ignores: self = .ignores(directory: try string("dir"), patterns: try optional("patterns"))
        case .pause, .resumeFolder: self = .pauseFolder(directory: try string("dir"), paused: op == .pause)
        case .resolve:
            let keep = try string("keep")
            guard !keep.trimmingSpaces().isEmpty else {
                throw .invalidArgument("'resolve' needs \"keep\": a device (name or ID prefix), local, remote or both")
            }
            self = .resolve(path: try string("path"), keep: keep)
        case .cancel: self = .cancel(transfer: try string("transfer"))
        case .resume: self = .resume(transfer: try optional("transfer"))
        case .msg: self = .message(peer: try string("peer"), text: try string("text"))
        case .disconnect: self = .disconnect(peer: try string("peer"))
        case .connect: self = .connect(peer: try string("peer"))
        case .unpair: self = .unpair(peer: try string("peer"))
        case .autoAccept:
            let what = try optional("what") ?? "files"
            guard what == "files" || what == "folders" else {
                throw .invalidArgument("'auto-accept' takes \"what\": files or folders, not '\(what)'")
            }
            self = .autoAccept(peer: try string("peer"), on: try flag("on") ?? true, folders: what == "folders")
        case .streamSend: self = .streamSend(peer: try string("peer"), name: try string("name"))
        case .streamReceive: self = .streamReceive(peer: try optional("peer"))
        case .select: self = .select(directory: try string("dir"), paths: try strings("paths"))
        case .tree: self = .tree(directory: try string("dir"), path: try optional("path"))
        case .history: self = .history(path: try string("path"))
        case .restore:
            var at: Int64?
            if let value = request["at"], value != .null {
                guard let ms = value.intValue.map(Int64.init) else { throw .invalidArgument("'restore': \"at\" must be a time in unix milliseconds") }
                at = ms
            }
            let version = try optional("version")
            if at != nil, version != nil { throw .invalidArgument("'restore' takes \"at\" or \"version\", not both") }
            self = .restore(path: try string("path"), at: at, version: version, to: try optional("to"))
        case .versions: self = .versions(directory: try string("dir"), policy: try optional("policy"))
        case .role:
            self = .role(directory: try string("dir"), peer: try string("peer"), role: try optional("role"), noDeletes: try flag("noDeletes"))
        case .changes: self = .roleChanges(directory: try string("dir"))
        case .override: self = .override(directory: try string("dir"))
        case .revert: self = .revert(directory: try string("dir"))
        case .guardLimits:
            func number(_ key: String) throws(EngineError) -> Int? {
                guard let value = request[key], value != .null else { return nil }
                guard let number = value.intValue, number >= 0 else { throw .invalidArgument("'guard': \"\(key)\" must be a number ≥ 0") }
                return number
            }
            self = .guardLimits(directory: try string("dir"), percent: try number("percent"), files: try number("files"))
        case .pairKey: self = .pairKey(key: try string("key"), name: try string("name"), addresses: try strings("addresses") ?? [])
        }
    }
}
