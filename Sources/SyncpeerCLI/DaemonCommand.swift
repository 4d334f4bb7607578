#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import Dispatch
internal import Foundation
internal import SyncEngine

/// `syncpeer daemon`: runs the node until SIGINT or SIGTERM.
struct DaemonCommand: Command {
    static let spec = CommandSpec(
        name: "daemon",
        abstract: "run this node: listen for peers, keep sessions, serve the other commands",
        discussion: """
        One daemon runs per home; a second one refuses to start and names the process that
        holds the home. Other commands (pair, accept, msg, peers, events ...) talk to it over
        the control socket control.sock in the home. Events are printed as they happen
        (NDJSON with --json). SIGINT or SIGTERM closes every session cleanly and exits 0.
        The default listen address is 0.0.0.0:\(NodeConfig.defaultPort); tests use 127.0.0.1:0 (any free port).
        """,
        options: [
            OptionSpec("listen", .value("HOST:PORT"), help: "address to listen on (default 0.0.0.0:\(NodeConfig.defaultPort); port 0 = any free port)"),
            OptionSpec("peer", .repeating("HOST:PORT"), help: "a peer address to connect to at start (static peer)"),
            OptionSpec("invitation-timeout", .value("SECONDS"), help: "how long an unanswered invitation lasts (default 30)"),
            OptionSpec("receive-dir", .value("DIR"), help: "where accepted files and folders go (default ~/Downloads)"),
            OptionSpec("auto-accept", help: "accept every invitation and offer without asking — for demos and tests only, never on a real network"),
        ],
        examples: ["syncpeer daemon", "syncpeer --home /tmp/alice daemon --listen 127.0.0.1:0"])

    var config = NodeConfig()

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        if let listen = arguments.value("listen") { config.listen = listen }
        config.staticPeers = arguments.all("peer")
        config.autoAccept = arguments.flag("auto-accept")
        if let directory = arguments.value("receive-dir") {
            config.receiveDirectory = URL(fileURLWithPath: directory).standardizedFileURL.path
        }
        if let text = arguments.value("invitation-timeout") {
            guard let seconds = Double(text), seconds > 0, seconds <= 86_400 else {
                throw .usage("--invitation-timeout takes a number of seconds between 0 and 86400, got '\(text)'")
            }
            config.invitationTimeout = .milliseconds(Int64(seconds * 1000))
        }
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        var config = self.config
        config.applyTestKnobs(context.environment)
        let output = context.output
        let json = context.globals.json
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let daemon: Daemon
        do {
            daemon = try Daemon.start(home: context.home, config: config) { event in
                let value = EventRenderer.json(event)
                if json { output.line(value.encodedLine()) } else if let line = EventRenderer.line(value) { output.line(line) }
            }
        } catch { throw CLIError(error) }
        if !json {
            output.line("syncpeer daemon \(daemon.node.identity.displayName) (\(daemon.node.identity.deviceID)) — Ctrl-C to stop")
        }
        let stopRequested = DispatchSemaphore(value: 0)
        let sources = [SIGINT, SIGTERM].map { sig in
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { stopRequested.signal() }
            source.resume()
            return source
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waiter = Thread {
                stopRequested.wait()
                continuation.resume()
            }
            waiter.start()
        }
        for source in sources { source.cancel() }
        daemon.stop()
        if !json { output.line("stopped") }
        return ExitCode.success
    }
}

