internal import SyncEngine

/// What one transfer's progress line says, worked out from its events and the clock of the
/// display (not the daemon's): the rate is the bytes that moved in the last seconds, a
/// transfer that moves nothing for 2 s is "stalled" (the daemon sends nothing then), a lost
/// link is "reconnecting…", an offer made again after one is "resuming". Pure: the time is
/// given, so the table tests can walk through a link cut.
struct TransferTrack {
    enum Status: Equatable {
        case preparing
        /// Offered, no answer yet; `offline`: the peer is not connected.
        case waiting(peer: String, offline: Bool)
        case moving(rate: Double?, eta: Double?)
        case stalled
        case reconnecting
        case resuming
        case paused(String?)
        case finishing
        case done
        /// failed, cancelled, declined, withdrawn (with the reason).
        case ended(TransferState, String?)
    }

    private(set) var info: TransferInfo
    private var meter = RateMeter()
    /// Seen moving (or paused after) before: a new offer is a resume.
    private var started = false
    private var activeSince: Double?
    /// Seconds spent moving bytes (not waiting for an answer or a peer).
    private var activeSeconds = 0.0
    private var lastActiveBytes: Int64?
    /// Bytes that moved while active (not what a resumed receiver already held).
    private(set) var movedBytes: Int64 = 0

    init(_ info: TransferInfo, at now: Double) {
        self.info = info
        self.info.state = .preparing  // so `update` sees the first state as a change
        update(info, at: now)
    }

    mutating func update(_ next: TransferInfo, at now: Double) {
        let previous = info.state
        info = next
        let bytes = next.bytes ?? 0
        if next.state == .active {
            if previous != .active {
                // Counting starts here: a jump to what a resumed receiver holds is no move.
                meter.restart(time: now, bytes: bytes)
                activeSince = now
                lastActiveBytes = bytes
            } else {
                meter.sample(time: now, bytes: bytes)
                if let last = lastActiveBytes, bytes > last { movedBytes += bytes - last }
                lastActiveBytes = bytes
            }
            started = true
        } else {
            if let since = activeSince { activeSeconds += max(0, now - since) }
            activeSince = nil
            // A pause before anything moved (the peer is offline) leaves it waiting; after bytes
            // moved (`started` by .active) the next offer is a resume.
            if next.state == .finishing { started = true }
        }
    }

    /// Seconds spent moving bytes so far.
    func movingSeconds(at now: Double) -> Double {
        activeSeconds + (activeSince.map { max(0, now - $0) } ?? 0)
    }

    func status(at now: Double) -> Status {
        switch info.state {
        case .preparing: return started ? .resuming : .preparing
        case .offered: return started ? .resuming : .waiting(peer: info.peer?.name ?? "the peer", offline: false)
        case .active:
            if meter.isStalled(at: now) { return .stalled }
            let rate = meter.rate(at: now)
            let remaining = max(0, (info.total ?? 0) - (info.bytes ?? 0))
            return .moving(rate: rate, eta: rate.flatMap { $0 > 1 ? Double(remaining) / $0 : nil })
        case .finishing: return .finishing
        case .paused:
            if let reason = info.reason, Self.isLinkLoss(reason) {
                return started ? .reconnecting : .waiting(peer: info.peer?.name ?? "the peer", offline: true)
            }
            return .paused(info.reason)
        case .completed: return .done
        case .failed, .cancelled, .declined, .withdrawn: return .ended(info.state, info.reason)
        }
    }

    /// A pause that ends by itself when the peer is back (the engine's reasons say so).
    static func isLinkLoss(_ reason: String) -> Bool {
        reason.contains("lost") || reason.contains("reconnect") || reason.hasPrefix("waiting for")
    }
}
