internal import Foundation
internal import SyncEngine

/// Turns node events (as JSON) into one human line each.
enum EventRenderer {
    static func peerName(_ event: JSONValue) -> String {
        guard let peer = event["peer"] else { return "?" }
        let name = peer["name"]?.stringValue ?? "?"
        let id = peer["id"]?.stringValue.map { String($0.prefix(7)) } ?? ""
        return "\(name) (\(id))"
    }

    static func line(_ event: JSONValue) -> String? {
        let who = peerName(event)
        switch event["event"]?.stringValue {
        case "listening":
            return "listening on \(event["address"]?.stringValue ?? "?")"
        case "state":
            var text = "\(who): \(event["state"]?.stringValue ?? "?")"
            if let reason = event["reason"]?.stringValue { text += " (\(reason))" }
            return text
        case "invitation":
            var text = "invitation \(event["invitation"]?.stringValue ?? "?") from \(who) at \(event["address"]?.stringValue ?? "?"); "
            text += "code \(event["sas"]?.stringValue ?? "?")"
            if let context = event["context"]?.stringValue { text += "; context: \(context)" }
            text += " — compare the code with the other device, then 'syncpeer accept \(event["invitation"]?.stringValue ?? "ID")'"
            return text
        case "invitation_closed":
            return "invitation \(event["invitation"]?.stringValue ?? "?") from \(who) \(event["outcome"]?.stringValue ?? "closed")"
        case "invitation_pending":
            return "\(who) has the invitation; code \(event["sas"]?.stringValue ?? "?")"
        case "paired":
            return "paired with \(who)"
        case "pairing_rejected":
            return "\(who) \(event["outcome"]?.stringValue ?? "rejected") the invitation"
        case "share_offer":
            return "\(who) shares the folder '\(event["name"]?.stringValue ?? "?")' (\(event["folder"]?.stringValue ?? "?")): 'syncpeer accept \(event["folder"]?.stringValue ?? "ID") [--into DIR]'"
        case "folder":
            var text = "folder \(event["name"]?.stringValue ?? event["folder"]?.stringValue ?? "?"): \(event["state"]?.stringValue ?? "?")"
            if let path = event["path"]?.stringValue { text += " at \(path)" }
            if let reason = event["reason"]?.stringValue { text += " (\(reason))" }
            return text
        case "offer":
            return "\(who) offers \(event["name"]?.stringValue ?? "?"): 'syncpeer accept \(event["transfer"]?.stringValue ?? "ID")'"
        case "message":
            return "\(event["peer"]?["name"]?.stringValue ?? "?"): \(event["text"]?.stringValue ?? "")"
        case "refused":
            return "refused \(who): \(event["reason"]?.stringValue ?? "")"
        case "dropped":
            return "dropped from \(who): \(event["reason"]?.stringValue ?? "")"
        case "found":
            var text = "found \(who) at \(event["address"]?.stringValue ?? "?")"
            if case let .object(info)? = event["info"], !info.isEmpty {
                text += " (" + info.keys.sorted().map { "\($0)=\(info[$0]?.stringValue ?? "")" }.joined(separator: " ") + ")"
            }
            return text
        case "lost":
            return "lost \(who)"
        case "registered":
            var text = "visible to others as '\(event["instance"]?.stringValue ?? "?")'"
            if let reason = event["reason"]?.stringValue { text += " (\(reason))" }
            return text
        case "visibility":
            return event["state"]?.stringValue == "visible" ? "visible to others" : "invisible to others"
        case "error":
            return "error: \(event["reason"]?.stringValue ?? "")" + (event["peer"] != nil ? " [\(who)]" : "")
        default:
            return nil
        }
    }
}

extension CommandContext {
    /// Connects to this home's daemon, mapping failure to a CLI error.
    func client() throws(CLIError) -> ControlClient {
        do { return try ControlClient.connect(home: home) } catch { throw CLIError(error) }
    }

    /// One request to the daemon.
    func request(_ op: String, _ arguments: [String: JSONValue] = [:],
                 onEvent: (JSONValue) -> Void = { _ in }) throws(CLIError) -> JSONValue {
        let client = try client()
        do { return try client.request(op, arguments, onEvent: onEvent) } catch { throw CLIError(error) }
    }

    /// Prints a result as JSON (with --json) or as the given text.
    func print(_ result: JSONValue, text: @autoclosure () -> String) {
        if globals.json { output.line(result.encodedLine()) } else { output.line(text()) }
    }
}
