internal import FoundationEssentials
internal import Synchronization
internal import SyncEngine

/// Turns node events into one human line each.
enum EventRenderer {
    /// "bob (MFRGGZD)": the name and the start of the device ID.
    static func peerName(_ peer: PeerRef?) -> String {
        guard let peer else { return "?" }
        return "\(peer.name) (\(peer.shortID))"
    }

    static func line(_ event: NodeEvent) -> String? {
        let who = peerName(event.peer)
        switch event {
        case let .listening(e):
            return "listening on \(e.address)"
        case let .state(e):
            var text = "\(who): \(e.state.rawValue)"
            if let reason = e.reason { text += " (\(reason))" }
            return text
        case let .invitation(e):
            var text = "invitation \(e.invitation) from \(who) at \(e.address); code \(e.code)"
            if let context = e.context { text += "; context: \(context)" }
            text += " — compare the code with the other device, then 'syncpeer accept \(e.invitation)'"
            return text
        case let .invitationClosed(e):
            return "invitation \(e.invitation ?? "?") from \(who) \(e.outcome)"
        case let .invitationPending(e):
            return "\(who) has the invitation; code \(e.code)"
        case .paired:
            return "paired with \(who)"
        case let .pairingRejected(e):
            return "\(who) \(e.outcome) the invitation"
        case let .shareOffer(e):
            return "\(who) shares the folder '\(e.name)' (\(e.folder)): 'syncpeer accept \(e.folder) [--into DIR]'"
        case let .folder(e):
            // Scanning, syncing, idle come with every change: for scripts (`events`), not
            // for a daemon's log.
            if let state = e.state, [.scanning, .syncing, .idle].contains(state), e.reason == nil { return nil }
            var text = "folder \(e.name ?? e.folder): \(e.state?.rawValue ?? "?")"
            if let path = e.path { text += " at \(path)" }
            if let reason = e.reason { text += " (\(reason))" }
            return text
        case let .file(e):
            // One line per file pulled would drown a daemon's log: only what needs a look.
            guard e.state == .failed || e.state == .conflict else { return nil }
            var text = "folder \(e.name): \(e.path) \(e.state.rawValue)"
            if let bytes = e.bytes { text += " (\(ProgressLayout.formatBytes(bytes)))" }
            if let copy = e.copy { text += "; the local version kept as \(copy)" }
            if let reason = e.reason { text += " (\(reason))" }
            return text
        case let .offer(e):
            return "\(who) offers \(e.name): 'syncpeer accept \(e.transfer)'"
        case let .message(e):
            return "\(e.peer.name): \(e.text)"
        case let .refused(e):
            return "refused \(who): \(e.reason)"
        case let .dropped(e):
            return "dropped from \(who): \(e.reason)"
        case let .found(e):
            var text = "found \(who) at \(e.address ?? "?")"
            if !e.info.isEmpty {
                text += " (" + e.info.keys.sorted().map { "\($0)=\(e.info[$0] ?? "")" }.joined(separator: " ") + ")"
            }
            return text
        case .lost:
            return "lost \(who)"
        case let .registered(e):
            var text = "visible to others as '\(e.instance)'"
            if let reason = e.reason { text += " (\(reason))" }
            return text
        case let .visibility(e):
            return e.state == "visible" ? "visible to others" : "invisible to others"
        case let .error(e):
            return "error: \(e.reason)" + (e.peer != nil ? " [\(who)]" : "")
        case .transfer:
            // Progress is the bar's (or `transfers`'); a daemon's log would fill with it.
            return nil
        }
    }

    /// A transfer's state in words: "report.pdf to bob (MFRGGZD): paused (connection lost)".
    static func transferLine(_ transfer: TransferInfo) -> String {
        var text = "\(transfer.name) \(transfer.direction == .send ? "to" : "from") \(peerName(transfer.peer)): \(transfer.state.rawValue)"
        if let reason = transfer.reason { text += " (\(reason))" }
        return text
    }
}

/// A daemon's log of transfers: a line when one changes state (never one per progress
/// step), and one that says so when an interrupted transfer resumes.
final class TransferLog: Sendable {
    private let seen = Mutex<[String: (state: TransferState, paused: Bool)]>([:])

    func line(_ event: NodeEvent) -> String? {
        guard case let .transfer(transfer) = event, let id = transfer.transfer else { return nil }
        return seen.withLock { seen -> String? in
            let before = seen[id]
            guard before?.state != transfer.state else { return nil }
            let paused = (before?.paused ?? false) || transfer.state == .paused
            seen[id] = transfer.isEnd ? nil : (transfer.state, paused)
            if transfer.state == .active, before?.paused == true {
                let held = ProgressLayout.formatPair(transfer.bytes ?? 0, transfer.total ?? 0)
                let percent = (transfer.total ?? 0) > 0 ? Int(Double(transfer.bytes ?? 0) * 100 / Double(transfer.total!)) : 0
                seen[id] = (.active, false)
                return "\(transfer.name) \(transfer.direction == .send ? "to" : "from") \(EventRenderer.peerName(transfer.peer)): resuming at \(percent)% (\(held) held)"
            }
            return EventRenderer.transferLine(transfer)
        }
    }
}

extension TransferInfo {
    /// Finished for good (the log forgets it).
    var isEnd: Bool { state.isFinished }
}

extension CommandContext {
    /// Connects to this home's daemon, mapping failure to a CLI error.
    func client() throws(CLIError) -> ControlClient {
        do { return try ControlClient.connect(home: home) } catch { throw CLIError(error) }
    }

    /// One request to the daemon, its result decoded as `T`.
    func call<T: Decodable>(_ request: ControlRequest, as type: T.Type = T.self,
                            onEvent: (NodeEvent) -> Void = { _ in }) throws(CLIError) -> T {
        let client = try client()
        do { return try client.call(request, as: T.self, onEvent: onEvent) } catch { throw CLIError(error) }
    }

    /// Asks for a list page after page (see `PageRequest`), handing each page's result to
    /// `each` as it arrives, so a long list is printed as it comes and never held whole.
    func eachPage<T: Decodable>(_ request: ControlRequest, as type: T.Type = T.self, client: ControlClient? = nil,
                                after: String? = nil, _ each: (T) -> Void) throws(CLIError) {
        let client = if let client { client } else { try self.client() }
        do throws(EngineError) { try client.eachPage(request, as: T.self, after: after, each) } catch { throw CLIError(error) }
    }

    /// Every item of a list, fetched page after page (for a lookup, not for printing).
    func all<T: Decodable>(_ request: ControlRequest, as type: [T].Type = [T].self) throws(CLIError) -> [T] {
        var list: [T] = []
        try eachPage(request, as: [T].self) { list += $0 }
        return list
    }

    /// Prints a list as it arrives: each item as one JSON line (with --json) or as `line`
    /// makes it; `empty` if it has none.
    func printPages<T: Codable>(_ request: ControlRequest, as type: T.Type = T.self, client: ControlClient? = nil,
                                empty: String?, line: (T) -> String) throws(CLIError) {
        var count = 0
        try eachPage(request, as: [T].self, client: client) { page in
            count += page.count
            if globals.json { printLines(page) } else { for item in page { output.line(line(item)) } }
        }
        if count == 0, !globals.json, let empty { output.line(empty) }
    }

    /// Prints a result as JSON (with --json) or as the given text.
    func print(_ result: some Encodable, text: @autoclosure () -> String) {
        if globals.json { output.json(result) } else { output.line(text()) }
    }

    /// Prints each item of a list as one JSON line (with --json).
    func printLines(_ list: [some Encodable]) {
        for item in list { output.json(item) }
    }
}
