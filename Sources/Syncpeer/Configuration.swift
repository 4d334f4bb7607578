internal import SyncEngine

extension Session {
    /// How a `Session` runs: everything comes from the caller (the library reads no environment
    /// variable). The defaults suit a program on a real network; tests shorten the timers.
    public struct Configuration: Sendable {
        /// The name peers see (1–63 bytes of UTF-8); used when the home has no identity yet.
        public var displayName: String
        /// Where to listen ("HOST:PORT"; port 0 picks a free port).
        public var listen = "127.0.0.1:0"
        /// Where accepted resources and folders go; nil: the user's download folder.
        public var receiveDirectory: String?
        /// Advertise and browse on the local network (multicast DNS). Off: peers are reached by
        /// address only.
        public var discovery = false
        /// The DNS-SD service type, without underscore (`_<type>._tcp.local`): nodes find only
        /// nodes of the same type (`MCNearbyServiceAdvertiser`'s `serviceType`).
        public var serviceType = "syncpeer"
        /// Key-value pairs published with the node, which browsers see in `.found`
        /// (`discoveryInfo`); each pair at most 255 bytes.
        public var discoveryInfo: [String: String] = [:]
        /// Interfaces discovery runs on (names such as "eth0", "lo"); empty: every interface that
        /// is up, multicast-capable and not loopback.
        public var interfaces: [String] = []
        /// How long an unanswered invitation lasts.
        public var invitationTimeout: Duration = .seconds(30)
        /// A handshake that takes longer is dropped.
        public var handshakeTimeout: Duration = .seconds(10)
        /// A ping goes out when nothing was sent for this long.
        public var keepaliveInterval: Duration = .seconds(2)
        /// A peer silent for this long is considered gone.
        public var deadPeerTimeout: Duration = .seconds(7)
        /// First wait before redialling a paired peer that went away.
        public var redialInterval: Duration = .seconds(1)
        /// A send that cannot hand over any byte for this long ends the session.
        public var sendTimeout: Duration = .seconds(30)
        /// The most bytes per second a resource is sent at (0: no limit).
        public var sendRateBytesPerSecond = 0

        public init(displayName: String) {
            self.displayName = displayName
        }

        /// The engine's configuration with these settings.
        var nodeConfig: NodeConfig {
            var config = NodeConfig()
            config.listen = listen
            if let receiveDirectory { config.receiveDirectory = receiveDirectory }
            config.discovery = discovery
            config.serviceType = serviceType
            config.discoveryInfo = discoveryInfo
            config.interfaces = interfaces
            config.invitationTimeout = invitationTimeout
            config.handshakeTimeout = handshakeTimeout
            config.keepaliveInterval = keepaliveInterval
            config.deadPeerTimeout = deadPeerTimeout
            config.redialInitial = redialInterval
            config.sendTimeout = sendTimeout
            config.sendRateBytesPerSecond = sendRateBytesPerSecond
            return config
        }
    }
}
