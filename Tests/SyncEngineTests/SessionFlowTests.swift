import Foundation
@testable import SyncEngine
import Testing

/// The stall check tells a peer that stopped reading from one that reads a long answer
/// slowly: writes completed within a send count as progress.
@Suite struct SessionFlowTests {
    @Test func writesWithinALongSendKeepTheStallCheckQuiet() throws {
        let flow = SessionFlow()
        flow.queue(SessionFlow.highWater + 1)  // one large answer waits to be sent
        let waiter = Thread { _ = flow.waitForRoom() }
        waiter.start()
        defer { flow.cancel() }
        let limit = Duration.seconds(1)
        let start = ContinuousClock.now
        // Writes keep landing (as a slow link drains a 16 MiB answer) for twice the limit.
        while ContinuousClock.now - start < limit * 2 {
            Thread.sleep(forTimeInterval: 0.05)
            flow.wrote()
            #expect(flow.stallReason(pausedFor: limit) == nil, "a peer that reads slowly is not stalled")
        }
        #expect(flow.isPaused, "the reader waited for room all along")
        // Then no write completes for longer than the limit: that peer stopped reading.
        Thread.sleep(forTimeInterval: 1.3)
        let reason = try #require(flow.stallReason(pausedFor: limit))
        #expect(reason.contains("stopped reading"))
    }
}
