import Foundation
import Glibc
@testable import PeerFiles
import Synchronization
import Testing

/// Collects the watcher's batches; tests poll it with generous timeouts.
final class WatchLog: Sendable {
    let batches = Mutex<[[WatchChange]]>([])

    var callback: @Sendable ([WatchChange]) -> Void { { batch in self.batches.withLock { $0.append(batch) } } }
    var all: [[WatchChange]] { batches.withLock { $0 } }
    var changes: [WatchChange] { all.flatMap { $0 } }
    var changedPaths: Set<String> {
        Set(changes.compactMap { if case .changed(let p) = $0 { return p } else { return nil } })
    }

    /// Waits (up to 10 s, polling) until `condition` holds; false on timeout.
    @discardableResult
    func wait(timeout: Double = 10, _ condition: (WatchLog) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition(self) { return true }
            usleep(20_000)
        }
        return condition(self)
    }
}

/// A pause long enough for a watcher with a short delay to have delivered (not a timing
/// assertion: only used to check that nothing *more* arrives).
func settle(_ seconds: Double) { usleep(UInt32(seconds * 1_000_000)) }

@Suite(.serialized) struct FolderWatcherTests {
    static let quick = Duration.milliseconds(200)

    @Test func createModifyDeleteAndRenameInNestedDirectories() throws {
        try withTemporaryDirectory { dir in
            try Tree.mkdir(dir + "/a/b")
            try Tree.write(dir + "/a/b/old.txt", "old")
            let log = WatchLog()
            let watcher = try FolderWatcher(root: dir, delay: Self.quick, onChanges: log.callback)
            defer { watcher.stop() }
            #expect(watcher.watchedDirectories == 3)

            try Tree.write(dir + "/a/b/f.txt", "new")
            #expect(log.wait { $0.changedPaths.contains("a/b/f.txt") })
            Tree.rewrite(dir + "/a/b/old.txt", "modified")
            #expect(log.wait { $0.changedPaths.contains("a/b/old.txt") })
            #expect(unlink(dir + "/a/b/f.txt") == 0)
            let before = log.all.count
            #expect(log.wait { $0.all.count > before && $0.all.last!.contains(.changed("a/b/f.txt")) })

            // A new directory with a file created right away, and a deeper new tree.
            try Tree.mkdir(dir + "/new")
            try Tree.write(dir + "/new/inner.txt", "inner")
            try Tree.mkdir(dir + "/x/y/z")
            try Tree.write(dir + "/x/y/z/deep.txt", "deep")
            #expect(log.wait { $0.changedPaths.isSuperset(of: ["new", "new/inner.txt", "x", "x/y/z/deep.txt"]) })
            // Their watches work.
            try Tree.write(dir + "/x/y/z/later.txt", "later")
            #expect(log.wait { $0.changedPaths.contains("x/y/z/later.txt") })

            // Renames: a file, then a directory (and a change inside it under its new name).
            #expect(rename(dir + "/a/b/old.txt", dir + "/a/renamed.txt") == 0)
            #expect(log.wait { $0.changes.contains(.renamed(from: "a/b/old.txt", to: "a/renamed.txt")) })
            #expect(log.changedPaths.isSuperset(of: ["a/b/old.txt", "a/renamed.txt"]))
            #expect(rename(dir + "/x/y", dir + "/moved") == 0)
            #expect(log.wait { $0.changes.contains(.renamed(from: "x/y", to: "moved")) })
            try Tree.write(dir + "/moved/z/inside.txt", "inside")
            #expect(log.wait { $0.changedPaths.contains("moved/z/inside.txt") })
            #expect(!log.changedPaths.contains("x/y/z/inside.txt"))

            // A directory removed: its watches are dropped.
            try FileManager.default.removeItem(atPath: dir + "/moved")
            #expect(log.wait { $0.changedPaths.contains("moved") })
            #expect(log.wait { _ in watcher.watchedDirectories == 5 })   // root, a, a/b, new, x
            #expect(!watcher.isDegraded)
        }
    }

    @Test func aSaveStormIsOneBatch() throws {
        try withTemporaryDirectory { dir in
            try Tree.write(dir + "/doc.txt", "v1")
            let log = WatchLog()
            let watcher = try FolderWatcher(root: dir, onChanges: log.callback)   // default delay: 1 s
            defer { watcher.stop() }
            // An editor's save: a temp file written 200 times, then renamed over the file.
            let fd = open(dir + "/.doc.txt.swp", O_CREAT | O_WRONLY | O_TRUNC, 0o644)
            for i in 0..<200 {
                let line = Array("line \(i)\n".utf8)
                _ = line.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            }
            close(fd)
            #expect(rename(dir + "/.doc.txt.swp", dir + "/doc.txt") == 0)
            #expect(log.wait { !$0.all.isEmpty })
            settle(3)   // three times the delay: nothing else may arrive
            let batches = log.all
            #expect(batches.count == 1)
            #expect(Set(batches.first ?? []) == [.changed(".doc.txt.swp"), .changed("doc.txt"),
                                                  .renamed(from: ".doc.txt.swp", to: "doc.txt")])
        }
    }

    @Test func burstOfWritesToOneFileIsOneBatch() throws {
        try withTemporaryDirectory { dir in
            let log = WatchLog()
            let watcher = try FolderWatcher(root: dir, onChanges: log.callback)
            defer { watcher.stop() }
            for i in 0..<200 {
                let fd = open(dir + "/busy.log", O_CREAT | O_WRONLY | O_APPEND, 0o644)
                _ = Glibc.write(fd, "x", 1)
                close(fd)
                if i % 50 == 0 { Tree.chmod(dir + "/busy.log", 0o600) }
            }
            #expect(log.wait { !$0.all.isEmpty })
            settle(3)
            #expect(log.all == [[.changed("busy.log")]])
        }
    }

    /// Issue 43: one file changed in a quiet folder is reported without waiting a whole
    /// gathering window (a 3 s window here; it comes after its 100 ms quick delay), while a
    /// burst of changes right after it still gathers into one batch.
    @Test func aChangeAfterQuietIsReportedQuicklyAndABurstStillGathers() throws {
        try withTemporaryDirectory { dir in
            let log = WatchLog()
            let watcher = try FolderWatcher(root: dir, delay: .seconds(3), quickDelay: .milliseconds(100),
                                            onChanges: log.callback)
            defer { watcher.stop() }
            try Tree.write(dir + "/first.txt", "one change")
            // Well before the 3 s window would have ended (the batch's own wait is 100 ms).
            #expect(log.wait(timeout: 2) { !$0.all.isEmpty })
            #expect(log.all == [[.changed("first.txt")]])

            // Twenty files, 50 ms apart, starting right after that batch: not after a quiet
            // period, so they gather for the whole window, into one batch.
            for i in 0..<20 {
                try Tree.write(dir + "/burst-\(i).txt", "\(i)")
                usleep(50_000)
            }
            let burst = Set((0..<20).map { "burst-\($0).txt" })
            #expect(log.wait(timeout: 15) { $0.changedPaths.isSuperset(of: burst) })
            let batches = log.all
            #expect(batches.count == 2)
            #expect(Set(batches.dropFirst().first ?? []) == Set(burst.map { WatchChange.changed($0) }))
        }
    }

    /// Issue 43 (C from the write): after a quiet period, a file written and closed is
    /// reported without its batch's quick delay (3 s here, as long as the window: before,
    /// it came after 3 s), a file still open for writing waits until it is closed, a deleted
    /// one waits the quick delay, and a
    /// burst of saved files still gathers (into at most two batches: the first files may go
    /// at once, the rest gather for the window).
    @Test func aSavedFileIsReportedAtOnceAnOpenOneWhenClosedAndABurstStillGathers() throws {
        try withTemporaryDirectory { dir in
            let log = WatchLog()
            let watcher = try FolderWatcher(root: dir, delay: .seconds(3), quickDelay: .seconds(3), onChanges: log.callback)
            defer { watcher.stop() }
            #expect(watcher.settleDelay == .milliseconds(20))
            try Tree.write(dir + "/saved.txt", "saved and closed")
            #expect(log.wait(timeout: 2) { !$0.all.isEmpty })
            #expect(log.all == [[.changed("saved.txt")]])

            settle(3.2)   // quiet again
            let fd = open(dir + "/open.log", O_CREAT | O_WRONLY, 0o644)
            #expect(fd >= 0)
            #expect(Glibc.write(fd, "still writing", 13) == 13)
            settle(0.5)
            #expect(log.all.count == 1)   // open: not reported yet
            close(fd)
            #expect(log.wait(timeout: 2) { $0.all.count == 2 })
            #expect(log.all.last == [.changed("open.log")])

            // A name removed waits the quick delay (a save may write it again right after).
            settle(3.2)
            #expect(unlink(dir + "/saved.txt") == 0)
            settle(0.5)
            #expect(log.all.count == 2)
            #expect(log.wait(timeout: 10) { $0.all.count == 3 })
            #expect(log.all.last == [.changed("saved.txt")])

            settle(3.2)
            let burst = (0..<50).map { "burst-\($0).txt" }
            for name in burst { try Tree.write(dir + "/" + name, name) }
            #expect(log.wait(timeout: 10) { $0.changedPaths.isSuperset(of: burst) })
            settle(0.5)
            #expect(log.all.count <= 5)
            #expect(Set(log.all.dropFirst(3).joined()) == Set(burst.map { WatchChange.changed($0) }))
        }
    }

    @Test func ownWritesAndIgnoredPathsAreFiltered() throws {
        try withTemporaryDirectory { dir in
            let log = WatchLog()
            let watcher = try FolderWatcher(root: dir, ignores: IgnorePatterns("*.log\nbuild/"), delay: Self.quick,
                                            onChanges: log.callback)
            defer { watcher.stop() }
            let watched = watcher.watchedDirectories

            // The node writes o.txt the way the puller does: temp file, then rename.
            watcher.beginOwnWrite("o.txt")
            try Tree.write(dir + "/o.txt.syncpeer-tmp", "from a peer")
            #expect(rename(dir + "/o.txt.syncpeer-tmp", dir + "/o.txt") == 0)
            watcher.endOwnWrite("o.txt")
            // And a directory of its own.
            watcher.beginOwnWrite("incoming")
            try Tree.mkdir(dir + "/incoming/sub")
            try Tree.write(dir + "/incoming/sub/f", "f")
            watcher.endOwnWrite("incoming")
            // Ignored things, and the staging directory.
            try Tree.write(dir + "/debug.log", "log")
            try Tree.mkdir(dir + "/build/out")
            try Tree.write(dir + "/build/out/a.o", "o")
            try Tree.mkdir(dir + "/.syncpeer-partial")
            try Tree.write(dir + "/.syncpeer-partial/t.part", "p")
            // Then the user's own change, which must be seen.
            try Tree.write(dir + "/user.txt", "mine")
            #expect(log.wait { $0.changedPaths.contains("user.txt") })
            settle(1)
            #expect(log.changedPaths == ["user.txt"])
            #expect(!log.changes.contains { if case .renamed = $0 { return true } else { return false } })
            // The node's directory is watched (it is part of the folder), the ignored ones are not.
            #expect(watcher.watchedDirectories == watched + 2)
            // After endOwnWrite, the user's changes to that path are reported again.
            try Tree.write(dir + "/o.txt", "edited by the user")
            #expect(log.wait { $0.changedPaths.contains("o.txt") })
        }
    }

    /// A pull's temporary renamed into place is its final name changed, not a rename (its
    /// first half is kept by cookie only); a temporary-named directory moved in or out is
    /// still followed by its path: the folder stays watched, and so does what it became.
    @Test func temporariesRenamedIntoPlaceAreTheirFinalNamesOnly() throws {
        try withTemporaryDirectory { dir in
            let log = WatchLog()
            let watcher = try FolderWatcher(root: dir, delay: Self.quick, onChanges: log.callback)
            defer { watcher.stop() }
            try Tree.mkdir(dir + "/sub")
            #expect(log.wait { $0.changedPaths.contains("sub") })
            try Tree.write(dir + "/sub/.a1b2.syncpeer-tmp", "from a peer")
            #expect(rename(dir + "/sub/.a1b2.syncpeer-tmp", dir + "/sub/placed.txt") == 0)
            try Tree.mkdir(dir + "/.c3d4.syncpeer-tmp")
            #expect(rename(dir + "/.c3d4.syncpeer-tmp", dir + "/made") == 0)
            try Tree.mkdir(dir + "/gone")
            #expect(log.wait { $0.changedPaths.isSuperset(of: ["sub/placed.txt", "made", "gone"]) })
            #expect(rename(dir + "/gone", dir + "/.e5f6.syncpeer-tmp") == 0)
            #expect(!log.changedPaths.contains { $0.hasSuffix(".syncpeer-tmp") })
            #expect(!log.changes.contains { if case .renamed = $0 { return true } else { return false } })
            // Everything is still watched: the root, the folder made from a temporary one.
            try Tree.write(dir + "/made/inside.txt", "x")
            try Tree.write(dir + "/later.txt", "y")
            #expect(log.wait { $0.changedPaths.isSuperset(of: ["made/inside.txt", "later.txt"]) })
        }
    }

    @Test func renameBetweenIgnoredAndVisibleNames() throws {
        try withTemporaryDirectory { dir in
            let log = WatchLog()
            let watcher = try FolderWatcher(root: dir, ignores: IgnorePatterns("*.part"), delay: Self.quick,
                                            onChanges: log.callback)
            defer { watcher.stop() }
            try Tree.write(dir + "/movie.part", "downloading")
            #expect(rename(dir + "/movie.part", dir + "/movie.mkv") == 0)
            #expect(log.wait { $0.changedPaths.contains("movie.mkv") })
            settle(0.6)
            #expect(log.changes == [.changed("movie.mkv")])
        }
    }

    @Test func rootGoneIsReported() throws {
        try withTemporaryDirectory { dir in
            let root = dir + "/folder"
            try Tree.mkdir(root + "/sub")
            try Tree.write(root + "/sub/f", "f")
            let log = WatchLog()
            let watcher = try FolderWatcher(root: root, delay: Self.quick, onChanges: log.callback)
            defer { watcher.stop() }
            try FileManager.default.removeItem(atPath: root)
            #expect(log.wait { $0.changes.contains(.rootGone) })
            #expect(log.all.last?.last == .rootGone)
        }
        try withTemporaryDirectory { dir in
            // Moved away counts as gone too.
            try Tree.mkdir(dir + "/folder")
            let log = WatchLog()
            let watcher = try FolderWatcher(root: dir + "/folder", delay: Self.quick, onChanges: log.callback)
            defer { watcher.stop() }
            #expect(rename(dir + "/folder", dir + "/elsewhere") == 0)
            #expect(log.wait { $0.changes.contains(.rootGone) })
        }
    }

    @Test func watchLimitIsReportedWithTheFixAndWatchingGoesOn() throws {
        try withTemporaryDirectory { dir in
            for d in ["a", "b", "c", "d"] { try Tree.mkdir(dir + "/" + d + "/deeper") }
            let log = WatchLog()
            let watcher = try FolderWatcher(root: dir, ignores: IgnorePatterns(), delay: Self.quick, maxDelay: nil,
                                            watchLimit: 3, onChanges: log.callback)
            defer { watcher.stop() }
            #expect(log.wait { !$0.all.isEmpty })
            let messages = log.changes.compactMap { if case .watchLimitReached(let m) = $0 { return m } else { return nil } }
            #expect(messages.count == 1)
            let message = messages.first ?? ""
            #expect(message.contains("sudo sysctl fs.inotify.max_user_watches="))
            if let current = FolderWatcher.readLimit("max_user_watches") {
                #expect(message.contains("fs.inotify.max_user_watches = \(current)"))
            }
            #expect(watcher.isDegraded)
            #expect(watcher.watchedDirectories == 3)
            // Degraded, not dead: the watched directories still report.
            try Tree.write(dir + "/top.txt", "t")
            #expect(log.wait { $0.changedPaths.contains("top.txt") })
            #expect(log.changes.filter { if case .watchLimitReached = $0 { return true } else { return false } }.count == 1)
        }
    }

    @Test func stopEndsReporting() throws {
        try withTemporaryDirectory { dir in
            let log = WatchLog()
            let watcher = try FolderWatcher(root: dir, delay: Self.quick, onChanges: log.callback)
            try Tree.write(dir + "/one", "1")
            #expect(log.wait { $0.changedPaths.contains("one") })
            watcher.stop()
            watcher.stop()
            try Tree.write(dir + "/two", "2")
            settle(0.6)
            #expect(!log.changedPaths.contains("two"))
        }
    }

    @Test func stopFromTheCallback() throws {
        try withTemporaryDirectory { dir in
            let box = Mutex<FolderWatcher?>(nil)
            let calls = Mutex(0)
            let watcher = try FolderWatcher(root: dir, delay: Self.quick) { _ in
                calls.withLock { $0 += 1 }
                box.withLock { $0?.stop() }
            }
            box.withLock { $0 = watcher }
            try Tree.write(dir + "/x", "x")
            let log = WatchLog()
            #expect(log.wait { _ in calls.withLock { $0 } == 1 })
            try Tree.write(dir + "/y", "y")
            settle(0.6)
            #expect(calls.withLock { $0 } == 1)
        }
    }

    @Test func missingRootThrows() {
        #expect(throws: FileError.self) {
            try FolderWatcher(root: "/nonexistent-\(UInt64.random(in: 0...UInt64.max))") { _ in }
        }
    }
}
