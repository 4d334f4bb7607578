internal import PeerCrypto
internal import PeerNet
internal import Synchronization

/// One `pair CERTIFICATE-ID` dialling the addresses the discovery servers gave for it
/// (ConnectionService+GlobalPairing): which are still to dial, how many dials are in flight,
/// and whether a handshake already won. Any thread; the service uses it on its queue.
final class PairRace: Sendable {
    /// At most this many dials at once (each a thread and a socket for up to its timeout).
    static let maxInFlight = 8

    let certificate: CertificateID
    let relays: [RelayEndpoint]
    let context: String?
    let progress: @Sendable (NodeEvent) -> Void
    let completion: @Sendable (Result<PeerRef, EngineError>) -> Void
    private let state: Mutex<(waiting: ArraySlice<String>, inFlight: Int, won: Bool)>

    init(certificate: CertificateID, direct: [String], relays: [RelayEndpoint], context: String?,
         progress: @escaping @Sendable (NodeEvent) -> Void, completion: @escaping @Sendable (Result<PeerRef, EngineError>) -> Void) {
        self.certificate = certificate
        self.relays = relays
        self.context = context
        self.progress = progress
        self.completion = completion
        var seen = Set<String>()
        state = Mutex((direct.filter { seen.insert($0).inserted }[...], 0, false))
    }

    /// The next address to dial, counted in flight; nil when none is left, a handshake won,
    /// or `maxInFlight` dials are under way.
    func nextAddress() -> String? {
        state.withLock { state in
            guard !state.won, state.inFlight < Self.maxInFlight, let next = state.waiting.popFirst() else { return nil }
            state.inFlight += 1
            return next
        }
    }

    /// A dial ended (failed, or its handshake completed).
    func ended() { state.withLock { $0.inFlight -= 1 } }

    /// Whether this completed handshake is the first (it goes on; a later one is closed).
    func claim() -> Bool {
        state.withLock { state in
            defer { state.won = true }
            return !state.won
        }
    }

    /// Every address was dialled and failed (none is left or in flight, and none won).
    var allFailed: Bool { state.withLock { !$0.won && $0.inFlight == 0 && $0.waiting.isEmpty } }
}
