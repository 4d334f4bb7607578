import Foundation
import Glibc
@testable import PeerFiles
import Synchronization
import Testing

/// Holds the watcher's thread inside its callback, so the file system moves on while the
/// kernel queues the events: the watcher then handles each event when the paths it names
/// are already something else (what a loaded machine does to it now and then).
final class WatchGate: Sendable {
    let log = WatchLog()
    private let held = Mutex(false)
    private let entered = DispatchSemaphore(value: 0)
    private let release = DispatchSemaphore(value: 0)

    var callback: @Sendable ([WatchChange]) -> Void {
        { batch in
            self.log.callback(batch)
            let hold = self.held.withLock { held in
                defer { held = false }
                return held
            }
            if hold {
                self.entered.signal()
                self.release.wait()
            }
        }
    }

    /// Makes a change, waits until the watcher's thread is held in the callback that
    /// reports it, runs `whileHeld`, then lets the thread go on.
    func hold(trigger: () throws -> Void, whileHeld: () throws -> Void) throws {
        held.withLock { $0 = true }
        try trigger()
        #expect(entered.wait(timeout: .now() + 10) == .success, "the watcher never reported the trigger")
        defer { release.signal() }
        try whileHeld()
    }
}

/// Directories made, moved or re-made while the watcher is behind: every one of them ends
/// up watched, so a file a user creates there later is reported (the chaos test found a
/// file that stayed on one node while every status said 100 %).
@Suite(.serialized) struct FolderWatcherRaceTests {
    static let quick = Duration.milliseconds(100)

    func watch(_ dir: String, _ body: (WatchGate) throws -> Void) throws {
        let gate = WatchGate()
        let watcher = try FolderWatcher(root: dir, delay: Self.quick, onChanges: gate.callback)
        defer { watcher.stop() }
        try body(gate)
    }

    func expectReported(_ gate: WatchGate, _ paths: [String], in dir: String) throws {
        for path in paths { try Tree.write(dir + "/" + path, path) }
        for path in paths {
            #expect(gate.log.wait { $0.changedPaths.contains(path) }, "\(path) was created but never reported")
        }
    }

    /// `mkdir new; mv new renamed`: when the watcher reads the creation, `new` is gone.
    @Test func aDirectoryRenamedBeforeItsCreationIsRead() throws {
        try withTemporaryDirectory { dir in
            try watch(dir) { gate in
                try gate.hold(trigger: { try Tree.write(dir + "/trigger", "t") }) {
                    try Tree.mkdir(dir + "/new")
                    #expect(rename(dir + "/new", dir + "/renamed") == 0)
                }
                #expect(gate.log.wait { $0.changedPaths.contains("renamed") })
                try expectReported(gate, ["renamed/later.txt"], in: dir)
            }
        }
    }

    /// `mkdir a; mv a b; mkdir a`: the watch made for the first `a` must not be taken for
    /// the second, and both directories end up watched.
    @Test func aDirectoryMovedAwayAndMadeAgain() throws {
        try withTemporaryDirectory { dir in
            try watch(dir) { gate in
                try gate.hold(trigger: { try Tree.write(dir + "/trigger", "t") }) {
                    try Tree.mkdir(dir + "/a")
                    #expect(rename(dir + "/a", dir + "/b") == 0)
                    try Tree.mkdir(dir + "/a")
                }
                #expect(gate.log.wait { $0.changedPaths.isSuperset(of: ["a", "b"]) })
                try expectReported(gate, ["a/in-new-a.txt", "b/in-b.txt"], in: dir)
            }
        }
    }

    /// A watched directory moved into one whose watch is not there yet (its move has no
    /// MOVED_TO), then a new directory of the old name: the new one stays watched.
    @Test func aDirectoryMovedIntoAnUnwatchedOneAndItsNameReused() throws {
        try withTemporaryDirectory { dir in
            try Tree.mkdir(dir + "/d")
            try watch(dir) { gate in
                try gate.hold(trigger: { try Tree.write(dir + "/trigger", "t") }) {
                    try Tree.mkdir(dir + "/n")
                    #expect(rename(dir + "/d", dir + "/n/d") == 0)
                    try Tree.mkdir(dir + "/d")
                }
                #expect(gate.log.wait { $0.changedPaths.isSuperset(of: ["d", "n"]) })
                try expectReported(gate, ["d/in-new-d.txt", "n/d/in-moved-d.txt"], in: dir)
            }
        }
    }

    /// `mkdir p/n; mv p q`: when the watcher reads the creation of `n`, its parent has
    /// another name.
    @Test func aParentRenamedBeforeItsNewChildIsRead() throws {
        try withTemporaryDirectory { dir in
            try Tree.mkdir(dir + "/p")
            try watch(dir) { gate in
                try gate.hold(trigger: { try Tree.write(dir + "/trigger", "t") }) {
                    try Tree.mkdir(dir + "/p/n")
                    #expect(rename(dir + "/p", dir + "/q") == 0)
                }
                #expect(gate.log.wait { $0.changedPaths.contains("q") })
                try expectReported(gate, ["q/n/later.txt", "q/direct.txt"], in: dir)
            }
        }
    }

    /// A directory deleted and made again (as a pull re-makes one a user deleted).
    @Test func aDirectoryDeletedAndMadeAgain() throws {
        try withTemporaryDirectory { dir in
            try Tree.mkdir(dir + "/x/y")
            try watch(dir) { gate in
                try gate.hold(trigger: { try Tree.write(dir + "/trigger", "t") }) {
                    try FileManager.default.removeItem(atPath: dir + "/x")
                    try Tree.mkdir(dir + "/x/y")
                }
                #expect(gate.log.wait { $0.changedPaths.contains("x") })
                try expectReported(gate, ["x/later.txt", "x/y/later.txt"], in: dir)
            }
        }
    }
}
