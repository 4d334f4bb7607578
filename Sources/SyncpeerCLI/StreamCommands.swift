internal import FoundationEssentials
internal import PeerFiles
internal import SyncEngine

/// `send -` and `receive --stdout`: standard input or output as a live byte stream. The
/// descriptor itself goes to the node over the control socket (`SCM_RIGHTS`), so the node
/// reads the pipe (or writes it) directly: nothing is spooled, nothing is copied through
/// this process, and the peer has the first bytes while the producer still runs.
enum StandardStreams {
    /// Writes standard input to `peer` as the stream `name`.
    static func send(_ context: CommandContext, peer: String, name: String) throws(CLIError) -> Int32 {
        let started = ContinuousClock.now
        let renderer = ProgressRenderer(output: context.output, json: context.globals.json)
        return try withNode(context, listen: "127.0.0.1:0") { client throws(CLIError) in
            let result: StreamResult
            do throws(EngineError) {
                // Piped text stays the summary alone (a stream has no states worth a line).
                let show = renderer.live || context.globals.json
                result = try client.call(.streamSend(peer: peer, name: name), passing: 0, onEvent: { if show { renderer.show($0) } })
            } catch {
                renderer.finish()
                throw CLIError(error)
            }
            renderer.finish()
            context.print(result, text: summary(result, verb: "Sent", preposition: "to", since: started))
            return ExitCode.success
        }
    }

    /// Writes the next stream a peer opens (from `peer`, if given) to standard output; the
    /// summary goes to standard error (standard output is the data).
    static func receive(_ context: CommandContext, peer: String?, listen: String) throws(CLIError) -> Int32 {
        let started = ContinuousClock.now
        return try withNode(context, listen: listen) { client throws(CLIError) in
            let result: StreamResult
            do throws(EngineError) { result = try client.call(.streamReceive(peer: peer), passing: 1) } catch {
                throw CLIError(error)
            }
            if context.globals.json {
                context.output.errJSON(result)
            } else {
                context.output.err(StandardOutput.shown(summary(result, verb: "Received", preposition: "from", since: started)) + "\n")
            }
            return ExitCode.success
        }
    }

    static func summary(_ result: StreamResult, verb: String, preposition: String, since started: ContinuousClock.Instant) -> String {
        let elapsed = ContinuousClock.now - started
        let seconds = max(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, 0.001)
        return "\(verb) stream \(result.name) \(preposition) \(EventRenderer.peerName(result.peer)): "
            + ProgressRenderer.formatBytes(result.bytes)
            + PlainText.format(" in %.1f s", seconds) + " (\(ProgressRenderer.formatBytes(Int64(Double(result.bytes) / seconds)))/s)"
    }
}
