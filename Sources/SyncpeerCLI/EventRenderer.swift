internal import Foundation
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
        switch event.event {
        case .listening:
            return "listening on \(event.address ?? "?")"
        case .state:
            var text = "\(who): \(event.state ?? "?")"
            if let reason = event.reason { text += " (\(reason))" }
            return text
        case .invitation:
            var text = "invitation \(event.invitation ?? "?") from \(who) at \(event.address ?? "?"); "
            text += "code \(event.code ?? "?")"
            if let context = event.context { text += "; context: \(context)" }
            text += " — compare the code with the other device, then 'syncpeer accept \(event.invitation ?? "ID")'"
            return text
        case .invitationClosed:
            return "invitation \(event.invitation ?? "?") from \(who) \(event.outcome ?? "closed")"
        case .invitationPending:
            return "\(who) has the invitation; code \(event.code ?? "?")"
        case .paired:
            return "paired with \(who)"
        case .pairingRejected:
            return "\(who) \(event.outcome ?? "rejected") the invitation"
        case .shareOffer:
            return "\(who) shares the folder '\(event.name ?? "?")' (\(event.folder ?? "?")): 'syncpeer accept \(event.folder ?? "ID") [--into DIR]'"
        case .folder:
            var text = "folder \(event.name ?? event.folder ?? "?"): \(event.state ?? "?")"
            if let path = event.path { text += " at \(path)" }
            if let reason = event.reason { text += " (\(reason))" }
            return text
        case .offer:
            return "\(who) offers \(event.name ?? "?"): 'syncpeer accept \(event.transfer ?? "ID")'"
        case .message:
            return "\(event.peer?.name ?? "?"): \(event.text ?? "")"
        case .refused:
            return "refused \(who): \(event.reason ?? "")"
        case .dropped:
            return "dropped from \(who): \(event.reason ?? "")"
        case .found:
            var text = "found \(who) at \(event.address ?? "?")"
            if let info = event.info, !info.isEmpty {
                text += " (" + info.keys.sorted().map { "\($0)=\(info[$0] ?? "")" }.joined(separator: " ") + ")"
            }
            return text
        case .lost:
            return "lost \(who)"
        case .registered:
            var text = "visible to others as '\(event.instance ?? "?")'"
            if let reason = event.reason { text += " (\(reason))" }
            return text
        case .visibility:
            return event.state == "visible" ? "visible to others" : "invisible to others"
        case .error:
            return "error: \(event.reason ?? "")" + (event.peer != nil ? " [\(who)]" : "")
        case .transfer:
            // Progress is the bar's (or `transfers`'); a daemon's log would fill with it.
            return nil
        }
    }

    /// A transfer's state in words: "report.pdf to bob (MFRGGZD): paused (connection lost)".
    static func transferLine(_ event: NodeEvent) -> String {
        var text = "\(event.name ?? "?") \(event.direction == "send" ? "to" : "from") \(peerName(event.peer)): \(event.state ?? "?")"
        if let reason = event.reason { text += " (\(reason))" }
        return text
    }
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

    /// Prints a result as JSON (with --json) or as the given text.
    func print(_ result: some Encodable, text: @autoclosure () -> String) {
        if globals.json { output.json(result) } else { output.line(text()) }
    }

    /// Prints each item of a list as one JSON line (with --json).
    func printLines(_ list: [some Encodable]) {
        for item in list { output.json(item) }
    }
}
