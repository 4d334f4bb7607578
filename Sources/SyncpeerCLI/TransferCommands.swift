#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import FoundationEssentials
internal import SyncEngine
internal import Synchronization
internal import Wormhole
internal import PeerNet
internal import Dispatch

/// Runs `body` with a control client: the running daemon's, or, when none runs, a node
/// started in this process for the duration of the command (same protocol either way).
func withNode(_ context: CommandContext, listen: String, _ body: (ControlClient) throws(CLIError) -> Int32) throws(CLIError) -> Int32 {
    if let client = try? ControlClient.connect(home: context.home) {
        return try body(client)
    }
    var config = NodeConfig()
    config.listen = listen
    // A node that lives for one command does not advertise itself or browse: it reaches
    // paired peers at their stored addresses (run a daemon to use discovery).
    config.discovery = false
    config.applyTestKnobs(context.environment)
    let daemon: Daemon
    do { daemon = try Daemon.start(home: context.home, config: config) { _ in } } catch { throw CLIError(error) }
    defer { daemon.stop() }
    let client: ControlClient
    do { client = try ControlClient.connect(home: context.home) } catch { throw CLIError(error) }
    return try body(client)
}

/// `syncpeer send PATH --to PEER`: a file, a folder or standard input, with live progress.
struct SendCommand: Command {
    static let spec = CommandSpec(
        name: "send",
        abstract: "send a file, a folder or standard input to a paired peer, with live progress",
        discussion: """
        The file is cut into content-defined chunks, each verified by its BLAKE3 hash on
        arrival; the receiver puts the file in place only when every chunk is verified. If
        the transfer is interrupted (a process killed, the network gone, a full disk), run
        the same command again, or let the daemons reconnect: it continues from the chunks
        the receiver already holds. PATH '-' streams standard input live (give --name; the
        receiver runs 'syncpeer receive --stdout'): not resumable, a cut is reported. Without a
        running daemon, a node runs in this process for the duration of the transfer.
        """,
        options: [
            OptionSpec("to", .repeating("PEER"), help: "display name, device ID (prefix) or HOST:PORT of a paired peer; repeat it to send to several at once (a line each)"),
            OptionSpec("name", .value("NAME"), help: "the name the receiver sees (default: the file or folder name; 'stdin' for -)"),
            OptionSpec("detach", help: "hand the transfer to the running daemon and return (Ctrl-C no longer cancels it)"),
            OptionSpec("code", .optionalValue("CODE"), help: "send to anyone with a wormhole code instead of a paired peer: prints a new code, or uses the one given (NUMBER-WORD-WORD; --code=CODE if PATH could be taken for one); the other side runs 'syncpeer receive CODE' or 'wormhole receive CODE'",
                       nextIsValue: WormholeCode.looksLikeCode),
            OptionSpec("text", .value("TEXT"), help: "with --code: send this text instead of a file"),
            OptionSpec("mailbox", .value("URL"), help: "with --code: the Magic Wormhole mailbox server (default \(WormholeServers.publicMailbox))"),
            OptionSpec("transit-relay", .value("HOST:PORT"), help: "with --code: the Magic Wormhole transit relay (default \(WormholeServers.publicTransitRelay))"),
        ],
        arguments: [ArgumentSpec("PATH", help: "a file, a folder, or - for standard input", optional: true)],
        examples: ["syncpeer send report.pdf --to laptop", "syncpeer send ~/Photos/trip --to bob",
                   "tar c notes | syncpeer send - --to bob --name notes.tar",
                   "syncpeer send big.iso --to bob --detach", "syncpeer send slides.pdf --to bob --to carol",
                   "syncpeer send photo.jpg --code", "syncpeer send photo.jpg --code 7-guitarist-revenge", "syncpeer send --code --text 'see you at 8'"])

    let path: String
    /// `--code`: the transfer goes through Magic Wormhole instead.
    let wormhole: WormholeSend?
    /// The peers, in the order given (each once).
    let peers: [String]
    let name: String?
    let detach: Bool

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        var peers: [String] = []
        for peer in arguments.all("to") where !peers.contains(peer) { peers.append(peer) }
        wormhole = try Self.wormhole(arguments, peers: peers)
        if wormhole != nil {
            (path, self.peers, name, detach) = (arguments.positionals.first ?? "", [], nil, false)
            return
        }
        for option in ["text", "mailbox", "transit-relay"] where arguments.value(option) != nil {
            throw .usage("--\(option) goes with --code")
        }
        guard !peers.isEmpty else { throw .usage("'syncpeer send' needs --to PEER (or --code)") }
        guard !arguments.positionals.isEmpty else { throw .usage("'syncpeer send' needs PATH") }
        self.peers = peers
        path = arguments.positionals[0]
        name = arguments.value("name")
        detach = arguments.flag("detach")
        if path == "-" && peers.count > 1 {
            throw .usage("standard input goes live to one peer; to send it to several, save it to a file first")
        }
    }

    /// The `--code` form, or nil for a transfer to paired peers.
    private static func wormhole(_ arguments: ParsedArguments, peers: [String]) throws(CLIError) -> WormholeSend? {
        guard arguments.flag("code") else { return nil }
        guard peers.isEmpty, !arguments.flag("detach"), arguments.value("name") == nil else {
            throw .usage("--code sends to whoever holds the code: no --to, --name or --detach")
        }
        let servers = WormholeServers(arguments)
        if let text = arguments.value("text") {
            guard arguments.positionals.isEmpty else { throw .usage("give PATH or --text, not both") }
            return WormholeSend(what: .text(text), code: arguments.value("code"), servers: servers)
        }
        guard let path = arguments.positionals.first, path != "-" else { throw .usage("--code needs PATH (a file or folder) or --text TEXT") }
        let source = URL(fileURLWithPath: path).standardizedFileURL.path
        guard FileManager.default.fileExists(atPath: source) else { throw .usage("\(path): no such file or folder") }
        return WormholeSend(what: .path(source), code: arguments.value("code"), servers: servers)
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        if let wormhole { return try wormhole.run(context) }
        if path == "-" {
            // Live: the node reads standard input itself and streams it as it comes.
            return try StandardStreams.send(context, peer: peers[0], name: name ?? "stdin")
        }
        let source = URL(fileURLWithPath: path).standardizedFileURL.path
        guard FileManager.default.fileExists(atPath: source) else {
            throw .usage("\(path): no such file or folder")
        }
        let requests = peers.map { ControlRequest.send(path: source, peer: $0, name: name, spool: nil, detach: detach) }
        if detach {
            for request in requests { _ = try runDetached(request, context) }
            return ExitCode.success
        }
        let renderer = ProgressRenderer(output: context.output, json: context.globals.json)
        return try withNode(context, listen: "127.0.0.1:0") { first throws(CLIError) in
            // One control connection per peer, each followed on its own thread; the renderer
            // draws a line per transfer.
            var clients = [first]
            for _ in peers.dropFirst() {
                do throws(EngineError) { clients.append(try ControlClient.connect(home: context.home)) } catch {
                    throw CLIError(error)
                }
            }
            // Ctrl-C: the daemon is told each client is going; it cancels the transfers (the
            // offers are withdrawn, the receivers' partial data removed) and answers.
            let all = clients
            let interrupt = InterruptWatch { for client in all { client.hangUp() } }
            defer { interrupt.stop() }
            let outcomes = Self.callAll(zip(clients, requests).map { ($0, $1) }, onEvent: renderer.show)
            for case let .success(result) in outcomes { renderer.finish(with: result) }
            renderer.finish()
            if interrupt.interrupted {
                return Self.reportCancelled(renderer.lastTransfer, context)
            }
            var failure: CLIError?
            for (peer, outcome) in zip(peers, outcomes) {
                switch outcome {
                case let .success(result):
                    let text = Self.summary(result, verb: "Sent", preposition: "to", timing: renderer.timing(of: result))
                    context.print(NodeEvent.transfer(result), text: text)
                case let .failure(error):
                    let error = CLIError(error)
                    // One peer: the error is the command's. Several: each failed peer is named,
                    // the others' results stand, and the exit code is the first failure's.
                    if peers.count == 1 { throw error }
                    if context.globals.json {
                        context.output.errJSON(JSONError(error))
                    } else {
                        context.output.err(StandardOutput.shown("syncpeer: error: to \(peer): \(error.description)") + "\n")
                    }
                    failure = failure ?? error
                }
            }
            return failure?.exitCode ?? ExitCode.success
        }
    }

    /// Makes each call on its own thread and waits for all: the outcomes in the same order.
    static func callAll(_ calls: [(ControlClient, ControlRequest)],
                        onEvent: @escaping @Sendable (NodeEvent) -> Void) -> [Result<TransferInfo, EngineError>] {
        if calls.count == 1 {
            let (client, request) = calls[0]
            do throws(EngineError) { return [.success(try client.call(request, onEvent: onEvent))] } catch { return [.failure(error)] }
        }
        final class Outcomes: Sendable {
            let list: Mutex<[Result<TransferInfo, EngineError>?]>
            init(_ count: Int) { list = Mutex(Array(repeating: nil, count: count)) }
        }
        let outcomes = Outcomes(calls.count)
        let group = DispatchGroup()
        for (index, (client, request)) in calls.enumerated() {
            group.enter()
            OSThread.start(name: "syncpeer-call") {
                let outcome: Result<TransferInfo, EngineError>
                do throws(EngineError) { outcome = .success(try client.call(request, onEvent: onEvent)) } catch { outcome = .failure(error) }
                outcomes.list.withLock { $0[index] = outcome }
                group.leave()
            }
        }
        group.wait()
        return outcomes.list.withLock { $0.map { $0! } }
    }

    /// After Ctrl-C: says what became of the transfer and exits 130.
    static func reportCancelled(_ last: TransferInfo?, _ context: CommandContext) -> Int32 {
        let name = last?.name ?? "the transfer"
        let peer = last.map { EventRenderer.peerName($0.peer) } ?? "the peer"
        let text = last?.transfer == nil
            ? "Cancelled \(name): nothing was offered to \(peer)"
            : "Cancelled \(name): the offer to \(peer) is withdrawn and whatever \(peer) received of it is removed"
        if context.globals.json {
            context.output.errJSON(JSONError(error: text, kind: "cancelled", exit: ExitCode.interrupted))
        } else {
            context.output.err(StandardOutput.shown(text) + "\n")
        }
        return ExitCode.interrupted
    }

    /// `--detach`: the running daemon takes the transfer; says how to follow and cancel it.
    private func runDetached(_ request: ControlRequest, _ context: CommandContext) throws(CLIError) -> Int32 {
        guard let client = try? ControlClient.connect(home: context.home) else {
            throw .state("--detach hands the transfer to a running daemon, and none is running for \(context.home.path): start one with 'syncpeer daemon'")
        }
        let result: TransferInfo
        do throws(EngineError) { result = try client.call(request) } catch {
            throw CLIError(error)
        }
        let id = String((result.transfer ?? "?").prefix(8))
        let state = result.state == .paused && result.reason != nil
            ? result.reason!
            : "\(result.state.rawValue) to \(EventRenderer.peerName(result.peer))"
        context.print(NodeEvent.transfer(result), text: """
            Handed \(result.name) to the daemon (transfer \(id), \(state)): \
            'syncpeer transfers --watch' follows it, 'syncpeer cancel \(id)' cancels it
            """)
        return ExitCode.success
    }

    /// "Sent video.bin to bob (YVJ4A2M): 200.0 MB, 0 B re-sent in 1.8 s (111.1 MB/s)", with
    /// `timing` (`ProgressRenderer.timing`) before where the receiver put it.
    static func summary(_ event: TransferInfo, verb: String, preposition: String, timing: String = "") -> String {
        var text = "\(verb) \(event.name) \(preposition) \(EventRenderer.peerName(event.peer)): \(ProgressRenderer.formatBytes(event.total ?? 0))"
        if let resent = event.resent { text += ", \(ProgressRenderer.formatBytes(resent)) re-sent" }
        text += timing
        if let path = event.path { text += " → \(path)" }
        return text
    }
}

/// `syncpeer receive`: waits for one offer, accepts or declines it, receives, exits.
struct ReceiveCommand: Command {
    static let spec = CommandSpec(
        name: "receive",
        abstract: "wait for one offer from a paired peer, receive it with live progress, and exit",
        discussion: """
        On a terminal, asks before accepting; otherwise give --accept or --decline. Names
        from the peer are checked (no '..', absolute paths, control characters or links out
        of the folder) and never overwrite: a clash becomes 'name (1).ext'. Without a
        running daemon, a node listens in this process (--listen) until the offer is done.
        """,
        options: [
            OptionSpec("dir", .value("DIR"), help: "where to put what is received (default ~/Downloads)"),
            OptionSpec("accept", help: "accept the offer without asking"),
            OptionSpec("decline", help: "decline the offer"),
            OptionSpec("listen", .value("HOST:PORT"), help: "where to listen when no daemon runs (default [::]:\(NodeConfig.defaultPort), IPv6 and IPv4)"),
            OptionSpec("stdout", help: "write the next stream a peer sends ('send -') to standard output"),
            OptionSpec("from", .value("PEER"), help: "with --stdout: only a stream from this peer"),
            OptionSpec("mailbox", .value("URL"), help: "with CODE: the Magic Wormhole mailbox server (default \(WormholeServers.publicMailbox))"),
            OptionSpec("transit-relay", .value("HOST:PORT"), help: "with CODE: the Magic Wormhole transit relay (default \(WormholeServers.publicTransitRelay))"),
        ],
        arguments: [ArgumentSpec("CODE", help: "a wormhole code from 'syncpeer send --code' or 'wormhole send': receive from anyone holding it", optional: true)],
        examples: ["syncpeer receive --dir ~/Incoming --accept", "syncpeer receive",
                   "syncpeer receive --stdout | tar x", "syncpeer receive 7-guitarist-revenge"])

    let directory: String?
    let decision: Bool?
    let listen: String
    let toStandardOutput: Bool
    let from: String?
    /// `CODE`: receive through Magic Wormhole instead.
    let wormhole: WormholeReceive?

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        if let code = arguments.positionals.first {
            wormhole = WormholeReceive(code: code, directory: arguments.value("dir").map { URL(fileURLWithPath: $0).standardizedFileURL.path },
                                       servers: WormholeServers(arguments))
        } else {
            for option in ["mailbox", "transit-relay"] where arguments.value(option) != nil { throw .usage("--\(option) goes with CODE") }
            wormhole = nil
        }
        toStandardOutput = arguments.flag("stdout")
        from = arguments.value("from")
        if from != nil && !toStandardOutput { throw .usage("--from goes with --stdout") }
        if arguments.flag("accept") && arguments.flag("decline") { throw .usage("give --accept or --decline, not both") }
        decision = arguments.flag("accept") ? true : arguments.flag("decline") ? false : nil
        directory = arguments.value("dir").map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        listen = arguments.value("listen") ?? "[::]:\(NodeConfig.defaultPort)"
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        if let wormhole { return try wormhole.run(context) }
        if toStandardOutput {
            return try StandardStreams.receive(context, peer: from, listen: listen)
        }
        if let directory {
            var isDirectory = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory else {
                throw .usage("--dir \(directory): no such folder")
            }
        }
        guard decision != nil || context.output.isTerminal else {
            throw .usage("no terminal to ask on: pass --accept or --decline")
        }
        let renderer = ProgressRenderer(output: context.output, json: context.globals.json)
        return try withNode(context, listen: listen) { client throws(CLIError) in
            let result: TransferInfo
            do throws(EngineError) {
                if let decision {
                    result = try client.call(.receive(directory: directory, accept: decision), onEvent: renderer.show)
                } else {
                    result = try askThenReceive(client, context, renderer)
                }
            } catch {
                renderer.finish()
                throw CLIError(error)
            }
            renderer.finish(with: result)
            if result.state == .declined {
                context.print(NodeEvent.transfer(result), text: "Declined \(result.name) from \(EventRenderer.peerName(result.peer))")
                return ExitCode.success
            }
            context.print(NodeEvent.transfer(result),
                          text: SendCommand.summary(result, verb: "Received", preposition: "from", timing: renderer.timing(of: result)))
            return ExitCode.success
        }
    }

    /// Waits for the next offer, asks on the terminal, answers and follows the transfer.
    private func askThenReceive(_ client: ControlClient, _ context: CommandContext,
                                _ renderer: ProgressRenderer) throws(EngineError) -> TransferInfo {
        context.output.line("waiting for an offer ...")
        var offer: NodeEvent.Offer?
        try client.streamEvents { event in
            guard case let .offer(found) = event else { return true }
            offer = found
            return false
        }
        guard let offer else { throw .network("the daemon stopped") }
        let id = offer.transfer
        let size = ProgressRenderer.formatBytes(offer.total)
        let files = offer.files
        context.output.out(StandardOutput.shown("\(EventRenderer.peerName(offer.peer)) offers \(offer.name) (\(size), \(files) file\(files == 1 ? "" : "s")). Accept? [y/N] "))
        let answer = readLine()?.lowercased() ?? ""
        let accept = answer == "y" || answer == "yes"
        let follower = try ControlClient.connect(home: context.home)
        return try follower.call(.answerOffer(transfer: id, accept: accept, directory: directory, follow: true), onEvent: renderer.show)
    }
}

/// `syncpeer transfers [--watch]`: active, paused and finished transfers.
struct TransfersCommand: Command {
    static let spec = CommandSpec(
        name: "transfers",
        abstract: "list active, paused and finished transfers with their progress",
        options: [OptionSpec("watch", help: "keep showing progress until Ctrl-C")],
        examples: ["syncpeer transfers", "syncpeer transfers --json", "syncpeer transfers --watch"])

    let watch: Bool
    init(parsing arguments: ParsedArguments) throws(CLIError) { watch = arguments.flag("watch") }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let renderer = ProgressRenderer(output: context.output, json: context.globals.json)
        let live = watch && renderer.live
        // Page after page from a daemon, printed as they come (the whole history with none).
        var count = 0
        var running: [TransferInfo] = []
        func take(_ page: [TransferInfo]) {
            count += page.count
            if live { running += page.filter { !$0.state.isFinished } } else { show(page, context) }
        }
        if let client = try? ControlClient.connect(home: context.home) {
            try context.eachPage(.transfers, as: [TransferInfo].self, client: client, take)
        } else {
            do throws(EngineError) { take(try Node.recordedTransfers(home: context.home)) } catch { throw CLIError(error) }
        }
        if live {
            // One live line per transfer, redrawn in place: the unfinished ones, then any
            // that start while watching.
            for item in running { renderer.show(.transfer(item)) }
            if running.isEmpty { context.output.line("no transfer running; waiting for one (Ctrl-C to stop)") }
        } else if count == 0 && !context.globals.json {
            context.output.line("no transfers yet")
        }
        guard watch else { return ExitCode.success }
        let client = try context.client()
        do {
            try client.streamEvents { event in
                if event.kind == .transfer || event.kind == .offer { renderer.show(event) }
                return true
            }
        } catch { throw CLIError(error) }
        return ExitCode.success
    }

    /// Prints one page of transfers.
    func show(_ list: [TransferInfo], _ context: CommandContext) {
        if context.globals.json {
            context.printLines(list.map(NodeEvent.transfer))
            return
        }
        for item in list {
            let id = String((item.transfer ?? "?").prefix(8))
            let direction = item.direction == .send ? "to  " : "from"
            let bytes = item.bytes ?? 0
            let total = item.total ?? 0
            let percent = total > 0 ? Int(Double(bytes) * 100 / Double(total)) : 100
            var line = "\(id)  \(item.state.rawValue)  \(percent)%  \(item.name)  \(direction) \(EventRenderer.peerName(item.peer))  \(ProgressRenderer.formatBytes(bytes))/\(ProgressRenderer.formatBytes(total))"
            if let reason = item.reason { line += "  (\(reason))" }
            context.output.line(line)
        }
    }
}

/// The full ID of the unfinished transfer that `typed` (any unique prefix) names.
func unfinishedTransfer(_ typed: String, _ context: CommandContext) throws(CLIError) -> String {
    let list = try context.all(.transfers, as: [TransferInfo].self).filter { !$0.state.isFinished }
    let candidates = list.compactMap { item in
        item.transfer.map {
            IDPrefix.Candidate(id: $0, label: "\(item.name) \(item.direction == .send ? "to" : "from") \(item.peer?.name ?? "?"), \(item.state.rawValue)")
        }
    }
    switch IDPrefix.match(typed, in: candidates) {
    case let .one(candidate): return candidate.id
    case let .ambiguous(found): throw .usage(IDPrefix.ambiguity(typed, found))
    case .none: throw .engine(.notFound, "no unfinished transfer '\(typed)'; see 'syncpeer transfers'")
    }
}

/// `syncpeer cancel ID`.
struct CancelCommand: Command {
    static let spec = CommandSpec(
        name: "cancel",
        abstract: "cancel a transfer (a receiver's partial data is removed)",
        arguments: [ArgumentSpec("ID", help: "the transfer ID, or any unique prefix of it (see 'syncpeer transfers')")],
        examples: ["syncpeer cancel 3f9a2c"])
    let id: String
    init(parsing arguments: ParsedArguments) throws(CLIError) { id = arguments.positionals[0] }
    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let id = try unfinishedTransfer(self.id, context)
        let result = try context.call(.cancel(transfer: id), as: TransferInfo.self)
        context.print(NodeEvent.transfer(result), text: "Cancelled \(result.name)")
        return ExitCode.success
    }
}

/// `syncpeer resume [ID]`.
struct ResumeCommand: Command {
    static let spec = CommandSpec(
        name: "resume",
        abstract: "offer paused transfers again (all, or one) to peers that are connected",
        discussion: "Daemons also resume on their own when a peer reconnects; this is for a transfer paused by a full disk or an error.",
        arguments: [ArgumentSpec("ID", help: "the transfer ID or its first characters", optional: true)],
        examples: ["syncpeer resume", "syncpeer resume 3f9a2c"])
    let id: String?
    init(parsing arguments: ParsedArguments) throws(CLIError) { id = arguments.positionals.first }
    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        var id: String?
        if let typed = self.id { id = try unfinishedTransfer(typed, context) }
        let result = try context.call(.resume(transfer: id), as: ResumeResult.self)
        context.print(result, text: "Offered again: \(result.offered) transfer(s)")
        return ExitCode.success
    }
}
