internal import PeerIndex

/// What a transfer is doing: the `state` of transfer events and of `syncpeer transfers`.
///
///     preparing ─▶ offered ─▶ active ─▶ finishing ─▶ completed
///         ▲           │  ▲       │          │
///         │           │  └── paused ◀───────┘          (link lost, disk full: resumable)
///         │           ├─▶ declined · withdrawn
///         └───────────┴─▶ cancelled · failed           (from any unfinished state)
///
/// `withdrawn` is an offer never answered whose sender went away (it offers again when it
/// is back). The index keeps fewer states (`TransferRecord.State`); `recorded` maps onto it.
package enum TransferState: String, Sendable, Codable, CaseIterable {
    /// The sender chunks its source; the receiver opens (and re-hashes) its partial files.
    case preparing
    /// Offered, waiting for the receiver's decision (or its accept after a reconnect).
    case offered
    /// Chunks are moving.
    case active
    /// Every chunk is acknowledged (sender) or verified (receiver); files are put in place.
    case finishing
    /// Stopped, resumable: the connection was lost, a disk is full, or a write failed.
    case paused
    /// The file or folder is in place at the receiver.
    case completed
    /// Gave up; the reason says why. Never resumed.
    case failed
    /// Cancelled by either end.
    case cancelled
    /// The receiver said no.
    case declined
    /// An offer never answered whose sender went away.
    case withdrawn

    /// Whether the transfer has ended for good (nothing more happens to it).
    package var isFinished: Bool {
        switch self {
        case .completed, .failed, .cancelled, .declined, .withdrawn: true
        case .preparing, .offered, .active, .finishing, .paused: false
        }
    }

    /// The state written to the index for this one (what resume looks at after a restart).
    var recorded: TransferRecord.State {
        switch self {
        case .preparing, .offered: .offered
        case .active, .finishing: .active
        case .paused: .paused
        case .completed: .completed
        case .failed: .failed
        case .cancelled, .declined, .withdrawn: .cancelled
        }
    }

    /// A state as the index recorded it (a transfer that is not running).
    init(_ recorded: TransferRecord.State) {
        switch recorded {
        case .offered: self = .offered
        case .active: self = .active
        case .paused: self = .paused
        case .completed: self = .completed
        case .failed: self = .failed
        case .cancelled: self = .cancelled
        }
    }

    /// Whether a running transfer may go from this state to `next`. Finished states are
    /// final; anything unfinished may pause, fail or be cancelled; the rest follows the
    /// diagram above. Node moves a transfer only through `TransferBase.move(to:)`, which
    /// refuses (and reports) any other step: a late frame cannot revive a cancelled transfer.
    package func allows(_ next: TransferState) -> Bool {
        if isFinished { return false }
        switch next {
        case .paused, .failed, .cancelled: return true
        case .preparing: return self == .offered || self == .paused || self == .active
        // (From active or finishing: handed over to the session kept of two, unpaused.)
        case .offered: return self == .preparing || self == .paused || self == .offered || self == .active || self == .finishing
        case .active: return self == .preparing || self == .offered || self == .paused
        case .finishing: return self == .active
        case .completed: return self == .finishing || self == .active
        case .declined, .withdrawn: return self == .offered || self == .preparing
        }
    }
}
