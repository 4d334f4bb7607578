import Testing
@testable import SyncpeerCLI

/// How `peers` and `status` print a live session's path and round trip.
struct PathTextTests {
    @Test func thePathAndRoundTripRead() {
        #expect(PathText.describe(path: nil, roundTripMs: 3) == nil)
        #expect(PathText.describe(path: "relay 192.0.2.1", roundTripMs: nil) == "relay 192.0.2.1")
        #expect(PathText.describe(path: "direct 192.0.2.7:41414", roundTripMs: 0.37) == "direct 192.0.2.7:41414  rtt 0.3 ms")
        #expect(PathText.describe(path: "relay 192.0.2.1", roundTripMs: 48.6) == "relay 192.0.2.1  rtt 49 ms")
    }
}
