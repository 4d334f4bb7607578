import Foundation
import Synchronization
import Syncpeer
import Testing

/// The API's async side: waiting holds no thread, the calling task's cancellation is
/// honoured, events are never dropped silently, configuration comes from the caller only.
/// Two sessions in this process, real sockets on loopback, discovery off.
@Suite(.serialized) struct SyncpeerAsyncTests {
    typealias Pair = SyncpeerAPITests.Pair

    /// A count that tasks and the test share.
    final class Counter: Sendable {
        private let value = Atomic<Int>(0)
        func add() { value.add(1, ordering: .relaxed) }
        var count: Int { value.load(ordering: .relaxed) }
    }

    /// A flag that tasks and the test share.
    final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        func set() { value.store(true, ordering: .relaxed) }
        var isSet: Bool { value.load(ordering: .relaxed) }
    }

    /// Threads of this process now.
    static func threadCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 0
    }

    /// Polls `condition` until it holds or `seconds` pass.
    static func eventually(_ seconds: Double, _ condition: () -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    /// 8 streams (the most one peer may open to another at once) with a read waiting on each,
    /// and 992 `acceptStream` calls waiting: 1,000 waits that hold no thread each (the
    /// process's thread count barely moves), all cancelled by cancelling their tasks, each
    /// returning `.cancelled` promptly; a stream whose read was cancelled is still usable.
    @Test func aThousandWaitsHoldNoThreadAndEndWhenTheirTaskIsCancelled() async throws {
        try await SyncpeerAPITests.onTestThread {
            let pair = try await Pair()
            var writers: [OutputByteStream] = []
            var readers: [InputByteStream] = []
            for index in 0..<8 {
                writers.append(try pair.alice.startStream(named: "s\(index)", to: pair.bobPeer))
                readers.append(try #require(try await pair.bob.acceptStream(from: pair.alice.myPeerID, timeout: .seconds(20))))
            }
            let before = Self.threadCount()
            let started = Counter()
            let finished = Counter()
            let bob = pair.bob
            let waitingReaders = readers
            let waits = Task { () -> [SyncpeerError?] in
                await withTaskGroup(of: SyncpeerError?.self) { group in
                    for reader in waitingReaders {
                        group.addTask {
                            started.add()
                            defer { finished.add() }
                            do throws(SyncpeerError) { _ = try await reader.read(); return nil } catch { return error }
                        }
                    }
                    for _ in 0..<992 {
                        group.addTask {
                            started.add()
                            defer { finished.add() }
                            // A bound, so that an API that ignores cancellation fails rather than hangs.
                            do throws(SyncpeerError) { _ = try await bob.acceptStream(timeout: .seconds(40)); return nil } catch { return error }
                        }
                    }
                    var outcomes: [SyncpeerError?] = []
                    for await outcome in group { outcomes.append(outcome) }
                    return outcomes
                }
            }
            // Generous: in the whole suite, tests blocking the cooperative pool can delay the tasks' start.
            #expect(await Self.eventually(120) { started.count == 1000 })
            try await Task.sleep(for: .milliseconds(500))
            let during = Self.threadCount()
            #expect(finished.count == 0, "a wait ended before it was cancelled")
            waits.cancel()
            let ended = await Self.eventually(20) { finished.count == 1000 }
            #expect(ended, "\(1000 - finished.count) of 1,000 waits ignored their task's cancellation")
            if !ended { writers.forEach { $0.cancel(reason: "the test gave up") } }
            let outcomes = await waits.value
            #expect(outcomes.count == 1000 && outcomes.allSatisfy { $0 == .cancelled },
                    "\(outcomes.filter { $0 != .cancelled }.prefix(3))")
            // Other suites run beside this one in the whole suite: a margin for their threads,
            // far below one thread per wait.
            #expect(during - before < 200, "1,000 waits took \(during - before) threads (\(before) → \(during))")
            print("threads: \(before) before, \(during) with 1,000 waits (8 reads, 992 accepts)")
            // A read cancelled while it waited took nothing: the stream goes on.
            for (writer, reader) in zip(writers, readers) {
                try await writer.write(Data("after \(writer.name)".utf8))
                #expect(try await reader.read() == Data("after \(writer.name)".utf8))
                try writer.finish()
                #expect(try await reader.read() == nil)
            }
        }
    }

    /// A writer with no room (the reader takes nothing: 2 MiB in flight at most) is
    /// suspended, not blocked; cancelling its task ends the write with `.cancelled` and cuts
    /// the stream, which its reader sees cut (never complete).
    @Test func aWriteWaitingForRoomIsCancelledWithItsTaskAndCutsTheStream() async throws {
        try await SyncpeerAPITests.onTestThread {
            let pair = try await Pair()
            let writer = try pair.alice.startStream(named: "big", to: pair.bobPeer)
            let reader = try #require(try await pair.bob.acceptStream(from: pair.alice.myPeerID, timeout: .seconds(20)))
            let done = Flag()
            let writing = Task { () -> SyncpeerError? in
                defer { done.set() }
                do throws(SyncpeerError) { try await writer.write(Data(count: 8 << 20)); return nil } catch { return error }
            }
            #expect(await Self.eventually(20) { writer.bytesWritten >= 2 << 20 })
            try await Task.sleep(for: .milliseconds(300))
            #expect(writer.bytesWritten <= 2 << 20 && !done.isSet, "the write went past the reader's window")
            writing.cancel()
            let ended = await Self.eventually(20) { done.isSet }
            #expect(ended, "the write ignored its task's cancellation")
            if !ended { reader.cancel(reason: "the test gave up") }
            #expect(await writing.value == .cancelled)
            var received = 0
            do throws(SyncpeerError) {
                while let piece = try await reader.read() { received += piece.count }
                Issue.record("a stream whose writer was cancelled ended complete after \(received) bytes")
            } catch {
                guard case .streamCut = error else { Issue.record("not streamCut: \(error)"); return }
            }
        }
    }

    /// An invitation nobody answers: cancelling the inviting task ends `invite` with
    /// `.cancelled` long before the invitation expires.
    @Test func anInviteIsCancelledWithItsTask() async throws {
        try await SyncpeerAPITests.onTestThread {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent("syncpeer-api-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: root) }
            var quiet = Session.Configuration(displayName: "bob")
            quiet.invitationTimeout = .seconds(25)
            let bob = try Session(home: root.appendingPathComponent("bob").path, configuration: quiet)
            defer { bob.close() }
            var caller = Session.Configuration(displayName: "carol")
            caller.invitationTimeout = .seconds(25)
            let carol = try Session(home: root.appendingPathComponent("carol").path, configuration: caller)
            defer { carol.close() }
            let shown = Flag()
            let done = Flag()
            let address = bob.address
            let inviting = Task { () -> SyncpeerError? in
                defer { done.set() }
                do throws(SyncpeerError) {
                    _ = try await carol.invite(address, context: "nobody answers") { _ in shown.set() }
                    return nil
                } catch { return error }
            }
            // The invitation reached bob (both ends show the code), and waits for his answer.
            #expect(await Self.eventually(20) { shown.isSet })
            inviting.cancel()
            // (60 s: the cancelled task resumes on the shared cooperative pool, which the
            // suite's synchronous end-to-end tests can hold busy for seconds under load; a
            // cancellation the library ignored would still never end it.)
            #expect(await Self.eventually(60) { done.isSet }, "invite ignored its task's cancellation")
            #expect(await inviting.value == .cancelled)
        }
    }

    /// Bob's program stops reading its events while 300 messages arrive, with room for 50:
    /// it then gets the first 50 in order and `.eventsDropped` with the count of the rest,
    /// never a silent gap.
    @Test func eventsBeyondTheBufferAreCountedNotSilentlyDropped() async throws {
        try await SyncpeerAPITests.onTestThread {
            let pair = try await Pair()
            let slow = pair.bob.events(bufferSize: 50)
            let all = pair.bob.events
            for index in 0..<300 { try pair.alice.send(Data("m\(index)".utf8), to: [pair.bobPeer]) }
            // Wait until bob has them all (a consumer that keeps up counts them).
            var arrived = 0
            for await event in all {
                if case .received = event { arrived += 1 }
                if arrived == 300 { break }
            }
            let reading = Task { () -> (messages: [String], dropped: Int?) in
                var messages: [String] = []
                for await event in slow {
                    switch event {
                    case let .received(data, _): messages.append(String(decoding: data, as: UTF8.self))
                    case let .eventsDropped(count): return (messages, count)
                    default: break
                    }
                }
                return (messages, nil)
            }
            // A bound: without the count, the loop would wait for ever.
            let watchdog = Task { try await Task.sleep(for: .seconds(20)); reading.cancel() }
            let (messages, dropped) = await reading.value
            watchdog.cancel()
            #expect(messages == (0..<messages.count).map { "m\($0)" }, "\(messages.prefix(5))")
            #expect(messages.count <= 50)
            let count = try #require(dropped, "no eventsDropped after \(messages.count) messages of 300")
            #expect(count >= 300 - messages.count, "\(messages.count) delivered, \(count) counted as dropped, of 300")
        }
    }

    /// `serviceType` and `discoveryInfo` come from the caller's configuration, reach the
    /// engine (a service type it refuses is refused), and show on the advertiser and browser.
    @Test func serviceTypeAndDiscoveryInfoAreTheCallers() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("syncpeer-api-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        var configuration = Session.Configuration(displayName: "alice")
        configuration.serviceType = "sp-test"
        configuration.discoveryInfo = ["room": "kitchen"]
        let session = try Session(home: root.appendingPathComponent("alice").path, configuration: configuration)
        defer { session.close() }
        #expect(Advertiser(session: session).serviceType == "sp-test")
        #expect(Advertiser(session: session).discoveryInfo == ["room": "kitchen"])
        #expect(Browser(session: session).serviceType == "sp-test")
        var bad = Session.Configuration(displayName: "bob")
        bad.serviceType = "no spaces allowed"
        do throws(SyncpeerError) {
            let refused = try Session(home: root.appendingPathComponent("bob").path, configuration: bad)
            refused.close()
            Issue.record("a service type with spaces was taken")
        } catch {
            guard case .invalidArgument = error else { Issue.record("not invalidArgument: \(error)"); return }
        }
    }

    /// Shared folders, a list that grows with use, read a page at a time: two pages of at
    /// most 2 hold the 3 folders alice shares, each once, and the last page says it is last.
    @Test func foldersAreReadAPageAtATime() async throws {
        try await SyncpeerAPITests.onTestThread {
            let pair = try await Pair()
            for name in ["alpha", "beta", "gamma"] {
                let folder = pair.root.appendingPathComponent(name)
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                try pair.alice.share(folder: folder, with: [pair.bobPeer])
            }
            let first = try pair.alice.folders(limit: 2)
            #expect(first.items.count == 2)
            let next = try #require(first.next, "a first page of 2 of 3 folders says it is the last")
            let second = try pair.alice.folders(after: next, limit: 2)
            #expect(second.next == nil)
            #expect((first.items + second.items).map(\.label).sorted() == ["alpha", "beta", "gamma"])
            #expect(try pair.alice.folders.count == 3)
            #expect(try pair.alice.conflicts(limit: 10).items.isEmpty)
        }
    }

    /// The library's public face uses its own types only, and it takes no setting from the
    /// host program's environment: Syncpeer imports the engine internally (so the compiler
    /// refuses an engine type in a public declaration) and reads no environment variable.
    @Test func theLibraryShowsOnlyItsOwnTypesAndReadsNoEnvironment() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Sources/Syncpeer")
        let files = try FileManager.default.contentsOfDirectory(atPath: sources.path).filter { $0.hasSuffix(".swift") }
        #expect(files.count >= 4)
        for file in files {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            let publicImports = text.split(separator: "\n").filter { $0.hasPrefix("public import ") || $0.hasPrefix("@_exported") }
            #expect(publicImports.allSatisfy { $0 == "public import Foundation" }, "\(file): \(publicImports)")
            for reader in ["ProcessInfo", "environment[", "getenv", "applyTestKnobs"] {
                #expect(!text.contains(reader), "\(file) reads the environment (\(reader))")
            }
        }
    }
}
