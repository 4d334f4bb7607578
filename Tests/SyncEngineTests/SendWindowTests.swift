import Testing
@testable import SyncEngine

struct SendWindowTests {
    @Test func sendsEverythingMissingOnceWithinTheWindow() throws {
        var window = SendWindow(sizes: Array(repeating: 10, count: 10), have: [2, 5], windowBytes: 30)
        #expect(window.confirmedBytes == 20)
        var sent: [Int] = []
        while !window.isComplete {
            let batch = window.next()
            #expect(window.inFlightBytes <= 30)
            #expect(!batch.isEmpty || !window.inFlight.isEmpty)
            sent += batch
            if let first = window.inFlight.min() { try window.ack(first, ok: true) }
        }
        #expect(sent.sorted() == [0, 1, 3, 4, 6, 7, 8, 9])
        #expect(Set(sent).count == sent.count, "nothing sent twice")
        #expect(window.sentBytes == 80)
        #expect(window.confirmedBytes == 100)
    }

    @Test func aChunkLargerThanTheWindowStillGoesAlone() {
        var window = SendWindow(sizes: [100, 5], have: [], windowBytes: 10)
        #expect(window.next() == [0])
        #expect(window.next() == [])
    }

    @Test func aRejectedChunkIsResentFirstThenGivesUp() throws {
        var window = SendWindow(sizes: [10, 10, 10], have: [], windowBytes: 10, maxAttempts: 3)
        #expect(window.next() == [0])
        try window.ack(0, ok: false)
        #expect(window.next() == [0])
        try window.ack(0, ok: false)
        #expect(window.next() == [0])
        #expect(throws: SendWindow.Failure.tooManyAttempts(index: 0)) { try window.ack(0, ok: false) }
    }

    @Test func unexpectedAcksAreErrors() throws {
        var window = SendWindow(sizes: [10, 10], have: [1], windowBytes: 100)
        #expect(throws: SendWindow.Failure.unexpectedAck(index: 1)) { try window.ack(1, ok: true) }
        #expect(window.next() == [0])
        try window.ack(0, ok: true)
        #expect(throws: SendWindow.Failure.unexpectedAck(index: 0)) { try window.ack(0, ok: true) }
        #expect(window.isComplete)
    }

    /// A streamed manifest's chunks join as they are hashed: each is sent once, after what
    /// was pending (a chunk sent again first), within the window.
    @Test func chunksAddedLaterAreSentAfterThePendingOnes() throws {
        var window = SendWindow(sizes: [10, 10], have: [], windowBytes: 20)
        #expect(window.next() == [0, 1])
        try window.ack(0, ok: false)
        try window.ack(1, ok: true)
        window.append(sizes: [10, 10])
        #expect(window.next() == [0, 2])
        try window.ack(0, ok: true)
        try window.ack(2, ok: true)
        #expect(!window.isComplete)
        #expect(window.next() == [3])
        try window.ack(3, ok: true)
        #expect(window.isComplete && window.confirmedBytes == 40 && window.totalBytes == 40)
        window.append(sizes: [5])
        #expect(!window.isComplete && window.next() == [4])
    }

    @Test func emptyTransferIsCompleteAtOnce() {
        var window = SendWindow(sizes: [], have: [])
        #expect(window.isComplete)
        #expect(window.next() == [])
    }

    /// Random acks (good and bad) never lose or duplicate a confirmed chunk, and the window
    /// bound holds throughout.
    @Test(arguments: 0..<20)
    func randomSchedules(seed: UInt64) {
        var state = seed &+ 0x9E37
        func random(_ n: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int(state >> 33) % n
        }
        let sizes = (0..<50).map { _ in 1 + random(20) }
        let have = Set((0..<50).filter { _ in random(4) == 0 })
        var window = SendWindow(sizes: sizes, have: have, windowBytes: 40, maxAttempts: 100)
        var confirmed = have
        var rng = SeededRNG(state: seed)
        var steps = 0
        while !window.isComplete && steps < 10_000 {
            steps += 1
            _ = window.next()
            #expect(window.inFlightBytes <= max(40, sizes.max()!))
            guard let pick = window.inFlight.sorted().randomElement(using: &rng) else { continue }
            let ok = random(3) != 0
            do { try window.ack(pick, ok: ok) } catch { Issue.record("\(error)") }
            if ok {
                #expect(!confirmed.contains(pick), "confirmed twice")
                confirmed.insert(pick)
            }
        }
        #expect(window.isComplete)
        #expect(confirmed == Set(0..<50))
        #expect(window.confirmedBytes == sizes.reduce(0, +))
    }
}

/// A tiny deterministic generator for `randomElement(using:)`.
struct SeededRNG: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return state
    }
}
