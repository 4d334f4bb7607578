import Testing
import PeerIndex
@testable import SyncEngine

/// The transfer state table: which steps a running transfer may take, and what the index
/// records for each state (resume after a restart reads it).
struct TransferStateTests {
    typealias S = TransferState

    struct Step: Sendable, CustomTestStringConvertible {
        let from: S
        let to: S
        let allowed: Bool
        var testDescription: String { "\(from) → \(to): \(allowed ? "allowed" : "refused")" }
    }

    static let steps: [Step] = [
        // The sender's way.
        Step(from: .offered, to: .active, allowed: true),
        Step(from: .active, to: .finishing, allowed: true),
        Step(from: .finishing, to: .completed, allowed: true),
        // The receiver's way: accepted, partial files opened, chunks, put in place.
        Step(from: .offered, to: .preparing, allowed: true),
        Step(from: .preparing, to: .active, allowed: true),
        // A link lost at any point pauses; a paused transfer is offered again.
        Step(from: .active, to: .paused, allowed: true),
        Step(from: .finishing, to: .paused, allowed: true),
        Step(from: .paused, to: .offered, allowed: true),
        // The session it ran on lost to a duplicate: offered again on the one kept, unpaused.
        Step(from: .active, to: .offered, allowed: true),
        Step(from: .paused, to: .preparing, allowed: true),
        // Decisions only while offered.
        Step(from: .offered, to: .declined, allowed: true),
        Step(from: .active, to: .declined, allowed: false),
        // Finished is final: a late frame cannot revive or re-end a transfer.
        Step(from: .cancelled, to: .active, allowed: false),
        Step(from: .completed, to: .failed, allowed: false),
        Step(from: .declined, to: .offered, allowed: false),
        Step(from: .failed, to: .paused, allowed: false),
        // Nothing is complete before its chunks moved, nor finishing before it was active.
        Step(from: .offered, to: .completed, allowed: false),
        Step(from: .paused, to: .finishing, allowed: false),
    ]

    @Test(arguments: steps)
    func step(_ step: Step) {
        #expect(step.from.allows(step.to) == step.allowed)
    }

    @Test func everyUnfinishedStateMayPauseFailOrBeCancelled() {
        for state in S.allCases where !state.isFinished {
            #expect(state.allows(.paused) && state.allows(.failed) && state.allows(.cancelled), "\(state)")
        }
        for state in S.allCases where state.isFinished {
            #expect(S.allCases.allSatisfy { !state.allows($0) }, "\(state) is final")
        }
    }

    /// What a restart finds: unfinished states stay resumable, finished ones do not.
    @Test func recordedStateKeepsResumability() {
        for state in S.allCases {
            #expect(state.recorded.isUnfinished == !state.isFinished, "\(state) → \(state.recorded)")
        }
        for recorded in TransferRecord.State.allCases {
            #expect(S(recorded).recorded == recorded)
        }
    }
}
