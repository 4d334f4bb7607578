#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import SyncEngine
internal import SyncpeerWeb
internal import PeerFiles
internal import PeerNet

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
        The default listen address is [::]:\(NodeConfig.defaultPort) (IPv6 and IPv4); tests use 127.0.0.1:0 (any free port).

        Discovery (DNS-SD over multicast DNS, as Bonjour) is on by default: the daemon
        advertises "<name>._<service-type>._tcp.local" with its port, device ID and
        --info pairs, lists the nodes it finds ('syncpeer browse'), and connects by itself
        to paired peers it finds; unpaired ones are only listed. It uses every interface
        that is up, multicast-capable and not loopback, or the --interface ones (else
        $SYNCPEER_INTERFACE, comma-separated). Where multicast is filtered (VPNs, guest
        Wi-Fi) use --no-discovery and --peer HOST:PORT.

        Options may also live in a configuration file (--config FILE, else
        $XDG_CONFIG_HOME/syncpeer/config, else ~/.config/syncpeer/config), one a line as
        'name = value' with the long names below ('receive-dir = ~/Inbox', 'no-discovery =
        true', a repeating option on several lines, '#' comments). The command line wins
        over the file. The systemd user unit runs 'syncpeer daemon' and so reads it.
        """,
        options: [
            OptionSpec("listen", .value("HOST:PORT"), help: "address to listen on (default [::]:\(NodeConfig.defaultPort), IPv6 and IPv4; port 0 = any free port)"),
            OptionSpec("peer", .repeating("HOST:PORT"), help: "a peer address to connect to at start (static peer)"),
            OptionSpec("relay", .repeating("relay://HOST:PORT/?id=ID"), help: "join this Syncthing relay (strelaysrv), and reach paired peers through it when dialling them directly fails"),
            OptionSpec("discovery-server", .repeating("https://HOST:PORT/?id=ID"), help: "announce this node's addresses to this Syncthing global discovery server (stdiscosrv), and look paired peers up there"),
            OptionSpec("relay-pool", .repeating("https://HOST/PATH"), help: "join the fastest few relays this Syncthing relay pool lists (its certificate checked against the system's CAs; SSL_CERT_FILE names another bundle)"),
            OptionSpec("global", help: "use Syncthing's public global discovery servers (discovery.syncthing.net) and relay pool (\(RelayPool.publicDefault), unless --relay-pool names others); off unless given"),
            OptionSpec("invitation-timeout", .value("SECONDS"), help: "how long an unanswered invitation lasts (default 30)"),
            OptionSpec("receive-dir", .value("DIR"), help: "where accepted files and folders go (default ~/Downloads)"),
            OptionSpec("auto-accept", help: "accept every invitation and offer without asking — for demos and tests only, never on a real network"),
            OptionSpec("no-discovery", help: "neither advertise nor browse on the local network (static peers and 'pair HOST:PORT' still work)"),
            OptionSpec("invisible", help: "browse but do not advertise this node until 'syncpeer visibility on'"),
            OptionSpec("service-type", .value("TYPE"), help: "DNS-SD service type: 1-15 lowercase letters, digits, hyphens (default syncpeer)"),
            OptionSpec("info", .repeating("KEY=VALUE"), help: "discovery info published with the service (each pair <= 255 bytes, <= 400 in all)"),
            OptionSpec("interface", .repeating("NAME"), help: "discover on this interface only (default: $SYNCPEER_INTERFACE, else every multicast interface but loopback)"),
            OptionSpec("gui", .value("HOST:PORT|off"), help: "serve the web dashboard there (default \(Self.defaultGUI), or any free port when that one is taken); 'off' turns it off; 'syncpeer gui' opens it"),
            OptionSpec("gui-allow-remote", help: "let --gui listen on an address other machines can reach (the key still guards it)"),
            OptionSpec("config", .value("FILE"), help: "read daemon options from FILE (default $XDG_CONFIG_HOME/syncpeer/config, else ~/.config/syncpeer/config, when it exists; 'none': no file)"),
        ],
        examples: ["syncpeer daemon", "syncpeer --home /tmp/alice daemon --listen 127.0.0.1:0",
                   "syncpeer daemon --service-type photos --info room=kitchen --interface eth0",
                   "syncpeer daemon --no-discovery --peer 10.8.0.2:41414"])

    var config = NodeConfig()
    /// Whether --interface was given (else SYNCPEER_INTERFACE applies).
    var interfacesGiven = false
    /// Where the dashboard listens (nil: off), and whether it was asked for explicitly.
    var gui: String? = Self.defaultGUI
    var guiGiven = false
    var guiAllowRemote = false
    static let defaultGUI = "127.0.0.1:8385"

    /// The command line as given (the configuration file is merged under it in `run`).
    let arguments: ParsedArguments
    /// Whether the configuration file was read into these options already.
    var configRead = false

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        self.arguments = arguments
        if let listen = arguments.value("listen") { config.listen = listen }
        config.staticPeers = arguments.all("peer")
        config.relays = arguments.all("relay")
        config.discoveryServers = arguments.all("discovery-server") + (arguments.flag("global") ? DiscoveryServer.publicDefaults : [])
        for server in config.discoveryServers {
            do { _ = try DiscoveryServer(parsing: server) } catch { throw .usage("--discovery-server: \(error.description)") }
        }
        for relay in config.relays {
            do { _ = try RelayURL.parse(relay) } catch { throw .usage("--relay: \(error.description)") }
        }
        config.relayPools = arguments.all("relay-pool")
        if config.relayPools.isEmpty && arguments.flag("global") { config.relayPools = [RelayPool.publicDefault] }
        for pool in config.relayPools {
            do { _ = try RelayPool(parsing: pool) } catch { throw .usage("--relay-pool: \(error.description)") }
        }
        config.autoAccept = arguments.flag("auto-accept")
        if let directory = arguments.value("receive-dir") {
            config.receiveDirectory = URL(fileURLWithPath: directory).standardizedFileURL.path
            config.receiveDirectoryGiven = true
        }
        if let text = arguments.value("invitation-timeout") {
            guard let seconds = Double(text), seconds > 0, seconds <= 86_400 else {
                throw .usage("--invitation-timeout takes a number of seconds between 0 and 86400, got '\(text)'")
            }
            config.invitationTimeout = .milliseconds(Int64(seconds * 1000))
        }
        config.discovery = !arguments.flag("no-discovery")
        config.visible = !arguments.flag("invisible")
        if let type = arguments.value("service-type") { config.serviceType = type }
        for pair in arguments.all("info") {
            guard let equals = pair.firstIndex(of: "=") else {
                throw .usage("--info takes KEY=VALUE, got '\(pair)': a discovery info pair needs a '='")
            }
            let key = String(pair[..<equals])
            guard config.discoveryInfo[key] == nil else { throw .usage("--info: the key '\(key)' is given twice") }
            config.discoveryInfo[key] = String(pair[pair.index(after: equals)...])
        }
        config.interfaces = arguments.all("interface")
        interfacesGiven = !config.interfaces.isEmpty
        if let value = arguments.value("gui") {
            gui = value == "off" ? nil : value
            guiGiven = true
        }
        guiAllowRemote = arguments.flag("gui-allow-remote")
        // The rules are checked even with --no-discovery: a bad flag is a bad flag.
        do { try config.validateDiscovery() } catch { throw .usage(error.description) }
    }

    /// SYNCPEER_INTERFACE (comma-separated names) when no --interface was given.
    static func interfaces(fromEnvironment value: String?) -> [String] {
        (value ?? "").split(separator: ",").map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        if !configRead, let file = try DaemonConfigFile.load(explicit: arguments.value("config"), environment: context.environment,
                                                             spec: Self.spec) {
            var configured = try DaemonCommand(parsing: DaemonConfigFile.merge(file: file, commandLine: arguments))
            configured.configRead = true
            return try await configured.run(context)
        }
        var config = self.config
        config.applyTestKnobs(context.environment)
        if let ttl = context.environment["SYNCPEER_MDNS_TTL"].flatMap(UInt32.init), ttl > 0 { config.mdnsRecordTTL = ttl }
        if !interfacesGiven {
            config.interfaces = Self.interfaces(fromEnvironment: context.environment["SYNCPEER_INTERFACE"])
            do { try config.validateDiscovery() } catch { throw .usage("SYNCPEER_INTERFACE: \(error.description)") }
        }
        let output = context.output
        let json = context.globals.json
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let daemon: Daemon
        do {
            let transfers = TransferLog()
            // An address a daemon of this home wrote before (one that crashed) is never handed
            // out; forgotten only once the lock is ours (a second daemon, refused, would take
            // the running one's dashboard away).
            daemon = try Daemon.start(home: context.home, config: config,
                                      whenLocked: { DashboardServer.forgetAddress(context.home) }) { event in
                if json {
                    if let line = FileEventLine.line(event) { output.out(line) } else { output.json(event) }
                } else if let line = EventRenderer.line(event) ?? transfers.line(event) {
                    output.line(line)
                }
            }
        } catch { throw CLIError(error) }
        if !json {
            output.line("syncpeer daemon \(daemon.node.identity.displayName) (\(daemon.node.identity.deviceID)) — Ctrl-C to stop")
        }
        let dashboard: DashboardServer?
        do { dashboard = try startDashboard(context.home, output: json ? nil : output) } catch {
            // The default dashboard is a convenience: its failure (a damaged gui-token)
            // is said, and the node runs on; one asked for with --gui must work.
            guard !guiGiven else {
                daemon.stop()
                throw CLIError(error)
            }
            if !json { output.line("dashboard off: \(error.description)") }
            dashboard = nil
        }
        let trimmer = MemoryTrimmer(releaseCaches: { daemon.releaseCaches() })
        defer { trimmer.stop() }
        let stopRequested = DispatchSemaphore(value: 0)
        let sources = [SIGINT, SIGTERM].map { sig in
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { stopRequested.signal() }
            source.resume()
            return source
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            OSThread.start(name: "syncpeer-stop") {
                stopRequested.wait()
                continuation.resume()
            }
        }
        for source in sources { source.cancel() }
        dashboard?.stop()
        daemon.stop()
        if !json { output.line("stopped") }
        return ExitCode.success
    }

    /// Starts the dashboard where --gui says. The default address falls back to any free
    /// port when another daemon has it (several homes on one machine); an address given
    /// explicitly must work or the daemon does not start.
    private func startDashboard(_ home: NodeHome, output: (any OutputSink)?) throws(EngineError) -> DashboardServer? {
        guard let gui else { return nil }
        let log: @Sendable (String) -> Void = { line in output?.line(line) }
        let server: DashboardServer
        do {
            server = try DashboardServer.start(home: home, listen: gui, allowRemote: guiAllowRemote, log: log)
        } catch {
            guard !guiGiven, case .connection = error else { throw error }
            server = try DashboardServer.start(home: home, listen: "127.0.0.1:0", allowRemote: false, log: log)
        }
        log("dashboard on \(server.url) ('syncpeer gui' opens it)")
        return server
    }
}
