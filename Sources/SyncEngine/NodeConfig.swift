internal import FoundationEssentials

/// How a node runs. Defaults are for real users; tests and the demo pass loopback and
/// short timeouts.
package struct NodeConfig: Sendable {
    /// The default TCP port (documented in the README).
    package static let defaultPort: UInt16 = 41_414

    /// Where to listen: "HOST:PORT"; port 0 picks a free port.
    /// IPv6 and IPv4 (dual stack; IPv4 alone on a kernel without IPv6).
    package var listen: String = "[::]:\(NodeConfig.defaultPort)"
    /// Accept every invitation without asking (demos and tests only).
    package var autoAccept = false
    /// How long an unanswered invitation lasts.
    package var invitationTimeout: Duration = .seconds(30)
    /// A handshake that takes longer is dropped.
    package var handshakeTimeout: Duration = .seconds(10)
    /// A ping is sent when nothing was sent for this long.
    package var keepaliveInterval: Duration = .seconds(2)
    /// A peer silent for this long is considered gone.
    package var deadPeerTimeout: Duration = .seconds(7)
    /// A write to a peer (or a control client) that cannot hand over any byte for this long
    /// fails and ends the session: a peer that stops reading never blocks a sender longer.
    package var sendTimeout: Duration = .seconds(30)
    /// Index entries a peer may have stored per shared folder beyond twice our own count
    /// (see `Node.indexQuota`).
    package var peerIndexAllowance = 200_000
    /// First and longest wait before redialling a paired peer.
    package var redialInitial: Duration = .seconds(1)
    package var redialMaximum: Duration = .seconds(30)
    /// Addresses to dial at start ("HOST:PORT"), in addition to paired peers' addresses.
    package var staticPeers: [String] = []
    /// Relays to join and to reach paired peers through (`daemon --relay relay://HOST:PORT/?id=ID`).
    package var relays: [String] = []
    /// Relay pools whose fastest relays are joined too (`daemon --relay-pool URL`; `--global`
    /// uses Syncthing's public pool, `RelayPool.publicDefault`).
    package var relayPools: [String] = []
    /// While a paired peer is reached through a relay, how often a direct path to it is tried
    /// (`SYNCPEER_DIRECT_RETRY_MS`); one that works replaces the relayed session.
    package var directRetryInterval: Duration = .seconds(60)
    /// Global discovery servers to announce to and look paired peers up at
    /// (`daemon --discovery-server URL`, `--global` for Syncthing's public ones).
    package var discoveryServers: [String] = []
    /// The least time between two lookups of one peer at the discovery servers.
    package var lookupInterval: Duration = .seconds(60)
    /// Where accepted files and folders go (`daemon --receive-dir`; default XDG_DOWNLOAD_DIR, else ~/Downloads).
    package var receiveDirectory: String = NodeConfig.defaultReceiveDirectory()
    /// Set when `receiveDirectory` was given (`daemon --receive-dir`): it wins over the one
    /// chosen with `receive-dir` and kept in the index.
    package var receiveDirectoryGiven = false
    /// Shared folders: how long file events are gathered before a rescan, and how often a
    /// full rescan runs as a safety net.
    package var watchDelay: Duration = .seconds(1)
    package var rescanInterval: Duration = .seconds(3600)
    /// Bytes of chunks a sender keeps in flight per transfer (bounds memory).
    package var sendWindowBytes = 16 << 20
    /// The most bytes of chunks a transfer sends per second (0: no limit). Tests that must
    /// interrupt a transfer midway set it, since a 200 MiB send over loopback takes well
    /// under a second (`SYNCPEER_SEND_RATE`).
    package var sendRateBytesPerSecond = 0
    /// The most bytes of block answers each shared folder serves per second (0: no limit):
    /// a slow uplink, for the fan-out test and benchmark (`SYNCPEER_SERVE_RATE`).
    package var serveRateBytesPerSecond = 0
    /// A file sent alone from this size on, fresh (no shared folder has hashed it), to a peer
    /// that takes streamed manifests, is offered at once and hashed while it is sent
    /// (`SYNCPEER_STREAM_MANIFEST_FROM`); a smaller one is hashed first (8 MiB: one read of
    /// the chunker, a few milliseconds).
    package var streamManifestFrom: Int64 = 8 << 20
    /// What small files' content that came with index pages may hold on this node, and
    /// twice what this node sends a peer ahead of its pulls (`IndexBlockWindow`): a test knob
    /// (`SYNCPEER_INDEX_BLOCK_BUDGET`).
    package var indexBlockHeldBytes = SharedFolder.indexBlockHeldBytes
    /// A shared folder's scan tells members that take it of the chunks of files from this
    /// size on while it hashes them (`SYNCPEER_GROWING_FROM`, a test knob; `GrowingFiles`).
    package var growingFrom: UInt64 = 64 << 20
    /// What a member told of a file it hashes is fetched ahead, and removed when no pull took
    /// it within this (`SYNCPEER_PREFETCH_EXPIRY_MS`, a test knob; `Prefetches`).
    package var prefetchExpiry: Duration = .seconds(30)

    /// XDG_DOWNLOAD_DIR (user-dirs.dirs), else ~/Downloads; created when a transfer is
    /// accepted into it.
    static func defaultReceiveDirectory() -> String {
        UserDirs.downloadDirectory(environment: ProcessInfo.processInfo.environment) { path in
            (try? String(contentsOfFile: path, encoding: .utf8)).map { String($0.prefix(65_536)) }
        }
    }

    /// Transport rekey interval in messages (each direction).
    package var rekeyInterval: UInt64 = 1 << 16

    // Discovery (DNS-SD over multicast DNS): see `NodeDiscovery`.

    /// Advertise and browse on the local network (`--no-discovery` turns it off).
    package var discovery = true
    /// Advertise this node (`--invisible` starts hidden; `syncpeer visibility` toggles it).
    package var visible = true
    /// The DNS-SD service type without underscore: `_<type>._tcp.local` (`--service-type`).
    package var serviceType = "syncpeer"
    /// The user's TXT pairs beside `id` and `v` (`--info key=value`).
    package var discoveryInfo: [String: String] = [:]
    /// Interface names (`--interface`, `SYNCPEER_INTERFACE`); empty: every interface that is
    /// up, multicast-capable and not loopback.
    package var interfaces: [String] = []
    /// TTL of every published record, in seconds; nil: RFC 6762 defaults (120 s for SRV
    /// and A, 75 min for PTR and TXT). A test knob (`SYNCPEER_MDNS_TTL`).
    package var mdnsRecordTTL: UInt32?

    /// This boot of the machine (see `RunningMarker`); a test knob (`SYNCPEER_BOOT_ID`) stands
    /// for a reboot after a simulated power cut.
    package var bootID = RunningMarker.currentBootID()
    /// Set by `Daemon.start`: the home's last daemon went down with the machine, so files its
    /// index records but the disk lacks are fetched again rather than deleted at peers.
    package var afterPowerLoss = false

    package init() {}

    /// Test knobs from the environment (documented in docs/PROTOCOL.md): shorter timers so
    /// tests do not wait, and a smaller send window to make transfers interruptible.
    package mutating func applyTestKnobs(_ environment: [String: String]) {
        func ms(_ name: String) -> Duration? { environment[name].flatMap(Int64.init).map { .milliseconds($0) } }
        if let value = ms("SYNCPEER_KEEPALIVE_MS") { keepaliveInterval = value }
        if let value = ms("SYNCPEER_DEAD_PEER_MS") { deadPeerTimeout = value }
        if let value = ms("SYNCPEER_HANDSHAKE_TIMEOUT_MS") { handshakeTimeout = value }
        if let value = ms("SYNCPEER_REDIAL_MS") { redialInitial = value }
        if let value = ms("SYNCPEER_LOOKUP_MS") { lookupInterval = value }
        if let value = ms("SYNCPEER_DIRECT_RETRY_MS") { directRetryInterval = value }
        if let value = ms("SYNCPEER_WATCH_DELAY_MS") { watchDelay = value }
        if let value = ms("SYNCPEER_RESCAN_MS") { rescanInterval = value }
        if let value = ms("SYNCPEER_SEND_TIMEOUT_MS") { sendTimeout = value }
        if let count = environment["SYNCPEER_PEER_INDEX_ALLOWANCE"].flatMap(Int.init), count > 0 { peerIndexAllowance = min(count, 1 << 40) }
        if let bytes = environment["SYNCPEER_SEND_WINDOW"].flatMap(Int.init), bytes > 0 { sendWindowBytes = bytes }
        if let rate = environment["SYNCPEER_SEND_RATE"].flatMap(Int.init), rate > 0 { sendRateBytesPerSecond = rate }
        if let rate = environment["SYNCPEER_SERVE_RATE"].flatMap(Int.init), rate > 0 { serveRateBytesPerSecond = rate }
        if let size = environment["SYNCPEER_STREAM_MANIFEST_FROM"].flatMap(Int64.init), size > 0 { streamManifestFrom = size }
        if let bytes = environment["SYNCPEER_INDEX_BLOCK_BUDGET"].flatMap(Int.init), bytes > 0 { indexBlockHeldBytes = bytes }
        if let size = environment["SYNCPEER_GROWING_FROM"].flatMap(UInt64.init), size > 0 { growingFrom = size }
        if let ms = environment["SYNCPEER_PREFETCH_EXPIRY_MS"].flatMap(Int.init), ms > 0 { prefetchExpiry = .milliseconds(ms) }
        if let boot = environment["SYNCPEER_BOOT_ID"], !boot.isEmpty { bootID = boot }
    }
}
