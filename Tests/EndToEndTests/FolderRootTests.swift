import Foundation
import Glibc
import PeerIndex
import Testing

/// A shared folder whose root vanished, was unmounted or replaced never deletes anything on
/// the peers, whatever its size (more than one scan batch of 1,000 entries here); the owner
/// stops with an error in `status`, resumes when the right root is back, and deletes
/// everywhere only after `syncpeer confirm`. Three real daemons on 127.0.0.1 (`Trio`).
@Suite(.serialized)
struct FolderRootTests {
    /// A rescan every second (the timer also looks at the root that often).
    static let environment = ["SYNCPEER_WATCH_DELAY_MS": "200", "SYNCPEER_RESCAN_MS": "1000"]
    /// More files than one scan batch (1,000): the old guard judged each batch alone.
    static let fileCount = 1_500
    static let isRoot = getuid() == 0

    typealias Trio = FolderSyncTests.Trio

    /// Regular files and links directly in `directory` and below, without the node's own
    /// marker, staging and temporary names.
    static func fileCount(_ directory: String) -> Int {
        guard let walker = FileManager.default.enumerator(atPath: directory) else { return 0 }
        var count = 0
        while let relative = walker.nextObject() as? String {
            let name = (relative as NSString).lastPathComponent
            if name == ".syncpeer-folder" || name.hasSuffix(".syncpeer-tmp") || relative.contains(".syncpeer-partial") { continue }
            var st = stat()
            if lstat(directory + "/" + relative, &st) == 0, st.st_mode & S_IFMT != S_IFDIR { count += 1 }
        }
        return count
    }

    static func makeFiles(_ directory: String, count: Int) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for i in 0..<count {
            guard FileManager.default.createFile(atPath: directory + "/f\(i).txt", contents: Data("file \(i)\n".utf8)) else {
                throw CocoaError(.fileWriteUnknown)
            }
        }
    }

    /// Shares alice's folder and waits until bob and carol have every file.
    static func shareAndSync(_ trio: Trio, files: Int) throws {
        try trio.share()
        try FolderSyncTests.eventually("bob and carol have all \(files) files", timeout: 240) {
            fileCount(trio.folders["bob"]!) == files && fileCount(trio.folders["carol"]!) == files
        }
    }

    /// Alice's folder state and error as `status --json` shows them.
    static func shownStatus(_ trio: Trio) -> (state: String, error: String) {
        let folder = try? FolderSyncTests.folderStatus(trio, trio.alice)
        return (folder?["state"] as? String ?? "?", folder?["error"] as? String ?? "")
    }

    /// Waits until alice's status shows an error containing `text` — or a peer lost files
    /// (then the checks that follow fail with what was lost) — and then for four more
    /// rescans and root checks of alice, after which bob and carol must still have every
    /// file and alice must still show that error. Returns the error shown.
    @discardableResult
    static func expectStoppedAndPeersKeepEverything(_ trio: Trio, files: Int, error text: String,
                                                    sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let lost = { fileCount(trio.folders["bob"]!) < files || fileCount(trio.folders["carol"]!) < files }
        try FolderSyncTests.eventually("alice's status shows an error with '\(text)'") {
            let shown = shownStatus(trio)
            return lost() || (shown.state == "error" && shown.error.contains(text))
        }
        Thread.sleep(forTimeInterval: 4)   // nothing may follow
        #expect(fileCount(trio.folders["bob"]!) == files, "bob lost files", sourceLocation: sourceLocation)
        #expect(fileCount(trio.folders["carol"]!) == files, "carol lost files", sourceLocation: sourceLocation)
        let shown = shownStatus(trio)
        #expect(shown.state == "error" && shown.error.contains(text), "alice shows: \(shown)", sourceLocation: sourceLocation)
        return shown.error
    }

    /// Runs mount(8) or umount(8); returns its exit status.
    @discardableResult
    static func run(_ tool: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/" + tool)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Unmounts `directory` (lazily if something still holds it).
    static func unmount(_ directory: String) throws {
        if try run("umount", [directory]) != 0 { try #require(try run("umount", ["-l", directory]) == 0, "umount \(directory)") }
    }

    /// A trio whose alice shares a tmpfs mounted on her folder, holding `fileCount` files
    /// that bob and carol have. `cleanup` unmounts it whatever happened.
    static func trioOnTmpfs() throws -> Trio {
        let trio = try Trio(environment: environment)
        do {
            try #require(try run("mount", ["-t", "tmpfs", "-o", "size=64m", "tmpfs", trio.folders["alice"]!]) == 0, "mount tmpfs")
            try makeFiles(trio.folders["alice"]!, count: fileCount)
            try shareAndSync(trio, files: fileCount)
        } catch {
            cleanup(trio)
            throw error
        }
        return trio
    }

    static func cleanup(_ trio: Trio) {
        _ = try? run("umount", ["-l", trio.folders["alice"]!])
        trio.env.cleanup()
    }

    /// (a) The daemon starts while the folder's disk is not mounted: only the empty mount
    /// point is there. Before: all 1,500 files were deleted on every peer.
    @Test(.enabled(if: isRoot, "mounts a tmpfs: needs root"))
    func aDaemonStartedWithTheDiskUnmountedDeletesNothing() throws {
        let trio = try Self.trioOnTmpfs()
        defer { Self.cleanup(trio) }
        _ = trio.alice.stop()
        try Self.unmount(trio.folders["alice"]!)
        trio.alice = try trio.restart(trio.alice)
        let shown = try Self.expectStoppedAndPeersKeepEverything(trio, files: Self.fileCount, error: "not the directory that was shared")
        #expect(shown.contains("empty directory"), "\(shown)")
        let status = try trio.env.cli(trio.alice, ["status"])
        #expect(status.stdout.contains("error: the folder root"), "\(status.stdout)")
        #expect(status.stdout.contains("syncpeer confirm"), "the error says how to confirm: \(status.stdout)")
    }

    /// (b) The disk is unmounted while the daemon runs (the watcher and the rescans see the
    /// empty mount point). Before: a rescan deleted everything beyond the first batch.
    @Test(.enabled(if: isRoot, "mounts a tmpfs: needs root"))
    func unmountingTheDiskWhileRunningDeletesNothing() throws {
        let trio = try Self.trioOnTmpfs()
        defer { Self.cleanup(trio) }
        try Self.unmount(trio.folders["alice"]!)
        try Self.expectStoppedAndPeersKeepEverything(trio, files: Self.fileCount, error: "not the directory that was shared")
        #expect(Self.fileCount(trio.folders["alice"]!) == 0, "nothing was pulled into the empty mount point")
    }

    /// (c) The root is moved away and a new directory made in its place (empty, then with a
    /// file): nothing is deleted anywhere; moving the real folder back resumes syncing.
    /// Before: the rescan of the new directory deleted every file on the peers.
    @Test func aReplacedRootDeletesNothingAndResumesWhenItIsBack() throws {
        let trio = try Trio(environment: Self.environment)
        defer { trio.env.cleanup() }
        let root = trio.folders["alice"]!
        try Self.makeFiles(root, count: 12)
        try Self.shareAndSync(trio, files: 12)
        let away = trio.env.home("alice-docs-moved")
        try FileManager.default.moveItem(atPath: root, toPath: away)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: false)
        try Self.expectStoppedAndPeersKeepEverything(trio, files: 12, error: "folder root")
        try "another folder's file".write(toFile: root + "/notes.txt", atomically: true, encoding: .utf8)
        try Self.expectStoppedAndPeersKeepEverything(trio, files: 12, error: "it is another directory")
        #expect(!FileManager.default.fileExists(atPath: trio.path("bob", "notes.txt")), "nothing of the impostor is sent")

        // The real folder comes back: alice resumes by herself, and syncs again.
        try FileManager.default.removeItem(atPath: root)
        try FileManager.default.moveItem(atPath: away, toPath: root)
        try FolderSyncTests.eventually("alice resumes") {
            (try? FolderSyncTests.folderStatus(trio, trio.alice))?["state"] as? String == "idle"
        }
        try "after".write(toFile: root + "/after.txt", atomically: true, encoding: .utf8)
        try FolderSyncTests.eventually("a new file reaches bob") { FileManager.default.fileExists(atPath: trio.path("bob", "after.txt")) }
        #expect(Self.fileCount(trio.folders["bob"]!) == 13)
    }

    /// (d) Every file is really gone (1,500 files, more than a scan batch, in one folder moved
    /// out at once): refused as a whole until `syncpeer confirm`, which then deletes them
    /// on every peer. Before: the first 1,000 deletions were sent at once.
    @Test func deletingEverythingWaitsForConfirmationThenPropagates() throws {
        let trio = try Trio(environment: Self.environment)
        defer { trio.env.cleanup() }
        let root = trio.folders["alice"]!
        try Self.makeFiles(root + "/data", count: Self.fileCount)
        try Self.shareAndSync(trio, files: Self.fileCount)
        try FileManager.default.moveItem(atPath: root + "/data", toPath: trio.env.home("data-elsewhere"))
        let shown = try Self.expectStoppedAndPeersKeepEverything(trio, files: Self.fileCount, error: "gone at once")
        #expect(shown.contains("syncpeer confirm \(root)"), "\(shown)")

        let confirmed = try trio.env.cli(trio.alice, ["confirm", root])
        try #require(confirmed.status == 0, "\(confirmed.stderr)")
        // Every file of theirs deleted by a peer at once: each peer holds it and asks its own
        // user (the mass-change guard, issue 41.5), then deletes them once confirmed there.
        for (name, daemon) in [("bob", trio.bob), ("carol", trio.carol)] {
            _ = try daemon.waitFor("folder", timeout: 60) { ($0["reason"] as? String)?.contains("holding the peers' changes") == true }
            #expect(FileManager.default.fileExists(atPath: trio.path(name, "data")), "\(name) deleted everything before confirming")
            let there = try trio.env.cli(daemon, ["confirm", trio.folders[name]!])
            try #require(there.status == 0, "\(there.stderr)")
        }
        try FolderSyncTests.eventually("the deletion reaches bob and carol", timeout: 60) {
            !FileManager.default.fileExists(atPath: trio.path("bob", "data"))
                && !FileManager.default.fileExists(atPath: trio.path("carol", "data"))
        }
        let folder = try FolderSyncTests.folderStatus(trio, trio.alice)
        #expect(folder["state"] as? String != "error", "\(folder)")
        #expect(folder["error"] == nil || folder["error"] is NSNull, "\(folder)")
    }

    /// A folder shared by an older version (no identity in the index, no marker in the root)
    /// is adopted at its first start when its root has content; an empty root while the
    /// index lists files (an unmounted disk at that first start) waits for `confirm`.
    @Test func aFolderFromAnOlderVersionIsAdoptedOnlyWhenItsRootIsPlausible() throws {
        let trio = try Trio(environment: Self.environment)
        defer { trio.env.cleanup() }
        let root = trio.folders["alice"]!
        let marker = root + "/.syncpeer-folder"
        try Self.makeFiles(root, count: 12)
        try Self.shareAndSync(trio, files: 12)
        #expect(FileManager.default.fileExists(atPath: marker), "sharing writes the marker")
        /// Alice stopped, with an index and a root as an older version left them.
        func downgrade() throws {
            _ = trio.alice.stop()
            try FileManager.default.removeItem(atPath: marker)
            let index = try NodeIndex.open(at: trio.alice.home + "/index.db")
            let folder = try #require(try index.folders().first)
            try index.setFolderRoot(id: folder.id, device: nil, inode: nil)
        }
        try downgrade()
        trio.alice = try trio.restart(trio.alice)
        try FolderSyncTests.eventually("alice adopts the root that has content") { FileManager.default.fileExists(atPath: marker) }
        try "new".write(toFile: root + "/new.txt", atomically: true, encoding: .utf8)
        try FolderSyncTests.eventually("syncing goes on") { FileManager.default.fileExists(atPath: trio.path("bob", "new.txt")) }

        try downgrade()
        try FileManager.default.moveItem(atPath: root, toPath: trio.env.home("alice-docs-elsewhere"))
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: false)
        trio.alice = try trio.restart(trio.alice)
        try Self.expectStoppedAndPeersKeepEverything(trio, files: 13, error: "is empty while 13 files")
        #expect(!FileManager.default.fileExists(atPath: marker), "an empty root is not adopted by itself")
    }
}
