package import PeerWire

/// The named byte streams of one session, as a pure state machine: frames and local calls
/// in, actions out, no I/O (the node performs the actions). Tested by event → action tables.
///
/// Rules (docs/PROTOCOL.md, "Streams"):
/// - The opener picks the stream ID: the session's initiator uses odd IDs, the responder even
///   ones, so a frame's ID always says who opened the stream.
/// - Credit-based flow control: a writer may send only as many data bytes as the reader
///   granted (`streamCredit`). The reader grants ``window`` at open and grants again what its
///   consumer takes, so a stream never holds more than ``window`` bytes at the reader.
/// - `streamClose` from the writer means complete; `streamReset` from either side, or the
///   end of the session, means cut.
///
/// Every field from the wire is bounded: at most ``maxIncoming`` streams a peer opened at
/// once (more are reset, not stored), data beyond the credit granted, a duplicate open, an
/// ID of the wrong parity, or credit beyond ``maxCredit`` are protocol violations (the
/// session ends). Frames for a stream that is no longer open are ignored: a reset crosses
/// data already in flight.
package struct StreamTable: Sendable, Equatable {
    /// Bytes the reader lets a writer have in flight (and so holds at most, per stream).
    package static let window = 2 << 20
    /// The reader grants again once its consumer took this much.
    package static let grantThreshold = window / 4
    /// Streams the peer may have open towards us at once (beyond: reset "too many streams").
    package static let maxIncoming = 8
    /// Streams we may have open towards the peer at once.
    package static let maxOutgoing = 8
    /// Most credit a writer may hold (a peer granting more breaks the protocol).
    package static let maxCredit = 64 << 20

    package enum Action: Sendable, Equatable {
        case send(Frame)
        /// The peer opened stream `id` (hand it to a consumer).
        case opened(id: UInt32, name: String)
        /// Bytes of an incoming stream.
        case data(id: UInt32, bytes: [UInt8])
        /// The peer wrote all of stream `id` (complete).
        case finished(id: UInt32)
        /// Stream `id` is cut (the peer reset it); the reason is for people.
        case cut(id: UInt32, reason: String)
        /// The writer of our stream `id` may send `bytes` more.
        case credit(id: UInt32, bytes: Int)
        /// The peer broke the stream rules: end the session with this reason.
        case violation(String)
    }

    struct Incoming: Sendable, Equatable {
        var name: String
        /// Bytes the peer may still send (granted, not yet received).
        var outstanding: Int
        /// Bytes consumed since the last grant.
        var ungranted = 0
    }

    struct Outgoing: Sendable, Equatable {
        var credit = 0
    }

    /// True when this side initiated the session (it opens odd IDs).
    package let isInitiator: Bool
    private(set) var incoming: [UInt32: Incoming] = [:]
    private(set) var outgoing: [UInt32: Outgoing] = [:]
    private var nextID: UInt32

    package init(isInitiator: Bool) {
        self.isInitiator = isInitiator
        nextID = isInitiator ? 1 : 2
    }

    /// Whether the peer opened (would open) stream `id`.
    func isPeers(_ id: UInt32) -> Bool { (id % 2 == 1) != isInitiator }

    package var openIncomingCount: Int { incoming.count }
    package var openOutgoingCount: Int { outgoing.count }

    // MARK: Local calls

    /// Opens a stream to the peer; nil when ``maxOutgoing`` are open already.
    package mutating func open(name: String) -> (id: UInt32, actions: [Action])? {
        guard outgoing.count < Self.maxOutgoing else { return nil }
        var id = nextID
        while outgoing[id] != nil { id &+= 2 }
        nextID = id &+ 2
        if nextID == 0 || nextID == 1 { nextID = isInitiator ? 1 : 2 }
        outgoing[id] = Outgoing()
        return (id, [.send(.streamOpen(id: id, name: name))])
    }

    /// Takes up to `bytes` of the credit of our stream `id` for a data frame; 0 when none is
    /// left (wait for a `credit` action) or the stream is not open.
    package mutating func take(credit bytes: Int, for id: UInt32) -> Int {
        guard var stream = outgoing[id] else { return 0 }
        let taken = min(bytes, stream.credit)
        stream.credit -= taken
        outgoing[id] = stream
        return taken
    }

    /// We wrote everything of our stream `id`.
    package mutating func finish(_ id: UInt32) -> [Action] {
        guard outgoing.removeValue(forKey: id) != nil else { return [] }
        return [.send(.streamClose(id: id))]
    }

    /// We abandon stream `id` (ours or the peer's): tell the peer.
    package mutating func reset(_ id: UInt32, reason: String) -> [Action] {
        let known = outgoing.removeValue(forKey: id) != nil || incoming.removeValue(forKey: id) != nil
        guard known else { return [] }
        return [.send(.streamReset(id: id, reason: String(reason.utf8.prefix(WireLimits.maxCloseReason)) ?? "reset"))]
    }

    /// Our consumer took `bytes` of the peer's stream `id`: grant them again (in batches).
    package mutating func consumed(_ bytes: Int, of id: UInt32) -> [Action] {
        guard var stream = incoming[id] else { return [] }
        stream.ungranted += bytes
        guard stream.ungranted >= Self.grantThreshold else {
            incoming[id] = stream
            return []
        }
        let grant = stream.ungranted
        stream.ungranted = 0
        stream.outstanding += grant
        incoming[id] = stream
        return [.send(.streamCredit(id: id, bytes: UInt32(grant)))]
    }

    /// The session ended: every open stream is cut.
    package mutating func sessionEnded(_ reason: String) -> [Action] {
        let ids = (Array(incoming.keys) + Array(outgoing.keys)).sorted()
        incoming.removeAll()
        outgoing.removeAll()
        return ids.map { .cut(id: $0, reason: reason) }
    }

    // MARK: Frames from the peer

    package mutating func received(_ frame: Frame) -> [Action] {
        switch frame {
        case let .streamOpen(id, name):
            guard isPeers(id) else { return [.violation("stream \(id) opened with one of our stream IDs")] }
            guard incoming[id] == nil else { return [.violation("stream \(id) opened twice")] }
            guard incoming.count < Self.maxIncoming else {
                return [.send(.streamReset(id: id, reason: "too many streams (at most \(Self.maxIncoming) at once)"))]
            }
            incoming[id] = Incoming(name: name, outstanding: Self.window)
            return [.opened(id: id, name: name), .send(.streamCredit(id: id, bytes: UInt32(Self.window)))]
        case let .streamData(id, bytes):
            guard isPeers(id) else { return [.violation("data for our own stream \(id)")] }
            guard var stream = incoming[id] else { return [] }
            guard bytes.count <= stream.outstanding else {
                return [.violation("stream \(id): \(bytes.count) bytes sent with \(stream.outstanding) bytes of credit")]
            }
            stream.outstanding -= bytes.count
            incoming[id] = stream
            return bytes.isEmpty ? [] : [.data(id: id, bytes: bytes)]
        case let .streamClose(id):
            guard isPeers(id) else { return [.violation("close of our own stream \(id)")] }
            guard incoming.removeValue(forKey: id) != nil else { return [] }
            return [.finished(id: id)]
        case let .streamCredit(id, bytes):
            guard !isPeers(id) else { return [.violation("credit for the peer's own stream \(id)")] }
            guard var stream = outgoing[id] else { return [] }
            guard stream.credit + Int(bytes) <= Self.maxCredit else {
                return [.violation("stream \(id): credit beyond \(Self.maxCredit) bytes")]
            }
            stream.credit += Int(bytes)
            outgoing[id] = stream
            return bytes == 0 ? [] : [.credit(id: id, bytes: Int(bytes))]
        case let .streamReset(id, reason):
            let known = incoming.removeValue(forKey: id) != nil || outgoing.removeValue(forKey: id) != nil
            return known ? [.cut(id: id, reason: "the peer cut the stream: \(reason)")] : []
        default:
            return []
        }
    }
}
