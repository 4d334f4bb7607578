import Foundation
import Glibc
import Testing

/// A headless Chromium (Debian's `chromium`) driven over the DevTools protocol by
/// Browser/cdp_driver.py, inside a network namespace of the test's own: the browser can
/// reach nothing but that namespace's loopback, where the daemons run.
final class BrowserDriver {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var pending = Data()

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Browser/cdp_driver.py").path

    init(namespace: TestNamespace) throws {
        process.executableURL = URL(fileURLWithPath: TestNetns.ipPath)
        process.arguments = ["netns", "exec", namespace.name, "/usr/bin/python3", Self.script]
        process.environment = ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let ready = try answer()
        try #require(ready["ok"] as? Bool == true, "the browser did not start: \(ready)")
    }

    private func answer(timeout: Double = 60) throws -> [String: Any] {
        let handle = output.fileHandleForReading
        let deadline = Date().addingTimeInterval(timeout)
        while pending.firstIndex(of: 0x0A) == nil {
            guard Date() < deadline, process.isRunning || !pending.isEmpty else { throw DaemonProcess.DaemonError.timeout("no answer from the browser driver") }
            let chunk = handle.availableData
            if chunk.isEmpty { throw DaemonProcess.DaemonError.timeout("the browser driver ended") }
            pending.append(chunk)
        }
        let newline = pending.firstIndex(of: 0x0A)!
        let line = pending[pending.startIndex..<newline]
        pending = Data(pending[(newline + 1)...])
        return (try JSONSerialization.jsonObject(with: line) as? [String: Any]) ?? [:]
    }

    @discardableResult
    func command(_ command: [String: Any]) throws -> [String: Any] {
        input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: command) + Data([0x0A]))
        let reply = try answer()
        try #require(reply["ok"] as? Bool == true, "browser: \(command["cmd"] ?? "?") failed: \(reply["error"] ?? reply)")
        return reply
    }

    func open(_ url: String) throws { try command(["cmd": "open", "url": url]) }

    func eval(_ js: String) throws -> Any? { try command(["cmd": "eval", "js": js])["value"] }

    /// Evaluates `js` until it gives a true value (the page renders asynchronously; while it
    /// navigates, an evaluation may find no page and is tried again).
    func waitUntil(_ what: String, _ js: String, timeout: Double = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: ["cmd": "eval", "js": js]) + Data([0x0A]))
            let reply = try answer()
            if reply["ok"] as? Bool != true {
                let error = "\(reply["error"] ?? reply)"
                try #require(error.contains("navigated") || error.contains("context"), "browser: eval failed: \(error)")
            } else if let value = reply["value"] as? Bool, value {
                return
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        let body = (try? eval("document.body ? document.body.innerText : ''")) as? String ?? ""
        Issue.record("\(what): not seen within \(timeout) s; the page says:\n\(body.prefix(2000))")
        throw DaemonProcess.DaemonError.timeout(what)
    }

    /// Writes a screenshot when SYNCPEER_SCREENSHOTS names a folder (`make screenshots`).
    func screenshot(_ name: String, width: Int = 1280, height: Int = 900) throws {
        guard let folder = ProcessInfo.processInfo.environment["SYNCPEER_SCREENSHOTS"], !folder.isEmpty else { return }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try command(["cmd": "shot", "path": folder + "/" + name + ".png", "width": width, "height": height])
    }

    func quit() {
        input.fileHandleForWriting.write(Data("{\"cmd\":\"quit\"}\n".utf8))
        try? input.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(15)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// The dashboard in a real browser against real daemons: the key, a live transfer bar on
/// the receiver's page, an invitation accepted from the page, a conflict resolved from it.
@Suite(.serialized, .enabled(if: TestNetns.available, Comment(rawValue: TestNetns.unavailableReason)))
struct DashboardBrowserTests {
    static let chromiumInstalled = FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium")

    /// Bob's daemon with its dashboard, in `namespace`, and the link `syncpeer gui` prints.
    static func daemon(_ env: SyncpeerRunner, _ name: String, in namespace: TestNamespace,
                       arguments: [String] = [], environment: [String: String] = [:], home: String? = nil,
                       listen: String = "127.0.0.1:0") throws -> (DaemonProcess, link: String) {
        let daemon = try DaemonProcess(env, name: name, home: home, arguments: ["--gui", "127.0.0.1:0"] + arguments,
                                       environment: environment, namespace: namespace.name, listen: listen)
        let gui = try env.cli(daemon, ["gui", "--no-open"])
        try #require(gui.status == 0, "gui failed: \(gui.stderr)")
        return (daemon, gui.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Runs `body` with a temporary test home and a loopback-only network namespace of its
    /// own (where the daemons and the browser run), and removes both afterwards.
    static func scene(_ body: (SyncpeerRunner, TestNamespace) throws -> Void) throws {
        try #require(chromiumInstalled, "chromium is not installed (make deps installs it)")
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let namespace = try TestNamespace.loopbackOnly()
        defer { namespace.remove() }
        try body(env, namespace)
    }

    @Test func thePageLoadsWithTheKeyAndIsRefusedWithout() throws {
        try Self.scene { env, namespace in
            let (bob, link) = try Self.daemon(env, "bob", in: namespace)
            defer { bob.stop() }
            let browser = try BrowserDriver(namespace: namespace)
            defer { browser.quit() }
            let plain = String(link.prefix { $0 != "?" })
            try browser.open(plain)
            try browser.waitUntil("the refusal", "document.body.innerText.includes('syncpeer gui') && !document.querySelector('#peers')")
            try browser.open(link)
            try browser.waitUntil("the dashboard", "!!document.querySelector('#peers') && !!document.querySelector('#transfers')")
            #expect(try browser.eval("location.search") as? String == "", "the key stayed in the address bar")
            // The cookie carries the session from now on: the plain address works.
            try browser.open(plain)
            try browser.waitUntil("the dashboard again", "!!document.querySelector('#folders')")
            try browser.screenshot("peers")
            try browser.screenshot("narrow", width: 390, height: 844)
        }
    }

    /// The page `syncpeer gui` opens the browser on, a file holding the login code, logs the
    /// browser in: its form posts from a file (`Origin: null`), and the SameSite=Strict
    /// cookie set by that cross-site answer is sent on the page's own move to `/`.
    @Test func theLoginPageGuiWritesLogsTheBrowserIn() throws {
        try Self.scene { env, namespace in
            let (bob, link) = try Self.daemon(env, "bob", in: namespace)
            defer { bob.stop() }
            let gui = try env.run(["--home", bob.home, "gui"], environment: ["BROWSER": "true"])
            try #require(gui.status == 0, "gui failed: \(gui.stderr)")
            let browser = try BrowserDriver(namespace: namespace)
            defer { browser.quit() }
            try browser.open(URL(fileURLWithPath: bob.home + "/gui-login.html").absoluteString)
            try browser.waitUntil("the dashboard", "!!document.querySelector('#peers') && !!document.querySelector('#transfers')")
            #expect(try browser.eval("location.href") as? String == String(link.prefix { $0 != "?" }))
        }
    }

    @Test func aSendFromTheCLIShowsALiveBarOnTheReceiversPage() throws {
        try Self.scene { env, namespace in
            let (bob, link) = try Self.daemon(env, "bob", in: namespace)
            defer { bob.stop() }
            let alice = try DaemonProcess(env, name: "alice", arguments: ["--gui", "off"], namespace: namespace.name)
            defer { alice.stop() }
            _ = try env.pair(alice, bob)
            let browser = try BrowserDriver(namespace: namespace)
            defer { browser.quit() }
            try browser.open(link)
            try browser.waitUntil("the dashboard", "!!document.querySelector('#transfers')")
            let file = env.home("big.bin")
            try TestFiles.random(file, size: 400 << 20)
            let send = Process()
            send.executableURL = URL(fileURLWithPath: SyncpeerRunner.binary)
            send.arguments = ["--home", alice.home, "send", file, "--to", "bob"]
            send.environment = ["PATH": "/usr/bin:/bin", "SYNCPEER_INTERFACE": "lo"]
            send.standardOutput = FileHandle.nullDevice
            send.standardError = FileHandle.nullDevice
            try send.run()
            defer { if send.isRunning { kill(send.processIdentifier, SIGTERM) } }
            // The offer appears on bob's page; accepting it there starts the transfer.
            let row = "document.querySelector('#transfers [data-transfer]')"
            try browser.waitUntil("the offer on bob's page", "!!\(row) && !!\(row).querySelector('button.accept')")
            _ = try browser.eval("\(row).querySelector('button.accept').click(), true")
            var seen: [Int] = []
            let deadline = Date().addingTimeInterval(120)
            while Date() < deadline {
                let text = try browser.eval("(\(row)?.querySelector('.percent')?.textContent) || ''") as? String ?? ""
                if let percent = Int(String(text.filter { $0.isNumber })), seen.last != percent { seen.append(percent) }
                if seen.last == 100 { break }
                Thread.sleep(forTimeInterval: 0.05)
            }
            try browser.screenshot("transfers")
            #expect(seen.last == 100, "the bar never reached 100 %: \(seen)")
            #expect(seen.filter { $0 > 0 && $0 < 100 }.count >= 2, "the bar did not move while the file was on its way: \(seen)")
            #expect(seen == seen.sorted(), "the bar went backwards: \(seen)")
            send.waitUntilExit()
            #expect(send.terminationStatus == 0)
            try TestFiles.expectSame(file, bob.home + "/Downloads/big.bin")
        }
    }

    @Test func anInvitationAcceptedOnThePagePairsThePeers() throws {
        try Self.scene { env, namespace in
            let (bob, link) = try Self.daemon(env, "bob", in: namespace, arguments: ["--invitation-timeout", "120"])
            defer { bob.stop() }
            let carol = try DaemonProcess(env, name: "carol", arguments: ["--gui", "off"], namespace: namespace.name)
            defer { carol.stop() }
            let browser = try BrowserDriver(namespace: namespace)
            defer { browser.quit() }
            try browser.open(link)
            try browser.waitUntil("the dashboard", "!!document.querySelector('#invitations')")
            let pairing = try PairingProcess(env, from: carol, to: bob)
            let invitation = try bob.waitFor("invitation")
            let code = try #require(invitation["code"] as? String)
            let item = "document.querySelector('#invitations [data-invitation]')"
            // The page shows the code both screens must agree on, then the answer pairs them.
            try browser.waitUntil("the invitation with its code", "!!\(item) && \(item).textContent.includes('\(code)')")
            // carol is connecting and not paired: not under "Paired and connected" (the peers
            // list is fetched in the same batch as the invitations; a second lets it land).
            Thread.sleep(forTimeInterval: 1)
            #expect(try browser.eval("document.querySelector('#peer-list').textContent.includes('carol')") as? Bool == false,
                    "carol is listed as paired and connected before the invitation is accepted")
            try browser.screenshot("invitation")
            _ = try browser.eval("\(item).querySelector('button.accept').click(), true")
            let result = try pairing.finish()
            #expect(result.status == 0, "pair failed: \(result.stderr)")
            let peers = try env.cli(bob, ["peers", "--json"])
            #expect(peers.stdout.contains("carol") && peers.stdout.contains("\"paired\":true"), "\(peers.stdout)")
            try browser.waitUntil("carol among the peers", "document.querySelector('#peers').textContent.includes('carol')")
        }
    }

    /// A node found by discovery is listed as nearby on the page; "Pair" there invites it.
    @Test func aNearbyNodeIsPairedByAClick() throws {
        try Self.scene { env, namespace in
            let carol = try DaemonProcess(env, name: "carol", in: namespace, arguments: ["--gui", "off", "--interface", "lo"])
            defer { carol.stop() }
            let bob = try DaemonProcess(env, name: "bob", in: namespace, arguments: ["--gui", "127.0.0.1:0", "--interface", "lo"])
            defer { bob.stop() }
            let gui = try env.cli(bob, ["gui", "--no-open"])
            try #require(gui.status == 0, "gui failed: \(gui.stderr)")
            let browser = try BrowserDriver(namespace: namespace)
            defer { browser.quit() }
            try browser.open(gui.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
            let row = "[...document.querySelectorAll('#peers [data-peer]')].find(e => e.textContent.includes('carol') && e.querySelector('button.pair'))"
            try browser.waitUntil("carol nearby with a Pair button", "!!(\(row))", timeout: 45)
            try browser.screenshot("nearby")
            _ = try browser.eval("(\(row)).querySelector('button.pair').click(), true")
            let invitation = try carol.waitFor("invitation", timeout: 30)
            let id = try #require(invitation["invitation"] as? String)
            let accepted = try env.cli(carol, ["accept", id])
            #expect(accepted.status == 0, "\(accepted.stderr)")
            try bob.waitForState("connected", peer: "carol", timeout: 30)
            try browser.waitUntil("carol paired on the page", "document.querySelector('#peer-list') ? document.querySelector('#peer-list').textContent.includes('carol') : document.querySelector('#peers').textContent.includes('paired')")
            // Hide from others, from the page: bob stops advertising, as 'visibility off' does.
            let hide = "document.querySelector('#device-actions button.hide')"
            try browser.waitUntil("bob visible, with a Hide button", "!!\(hide) && document.querySelector('#device-visibility').textContent.startsWith('visible to others')")
            _ = try browser.eval("\(hide).click(), true")
            try FolderSyncTests.eventually("bob hidden") { ((try? env.cli(bob, ["visibility", "--json"]))?.stdout ?? "").contains("\"visible\":false") }
            try browser.waitUntil("the page says so", "document.querySelector('#device-visibility').textContent === 'invisible to others'")
        }
    }

    @Test func aConflictResolvedOnThePageChangesTheFiles() throws {
        try Self.scene { env, namespace in
            let fast = FolderSyncTests.environment
            for name in ["alice-recv", "bob-recv", "docs"] { try FileManager.default.createDirectory(atPath: env.home(name), withIntermediateDirectories: true) }
            var alice = try DaemonProcess(env, name: "alice", arguments: ["--gui", "off", "--auto-accept", "--receive-dir", env.home("alice-recv")],
                                          environment: fast, namespace: namespace.name)
            let (bob, link) = try Self.daemon(env, "bob", in: namespace, arguments: ["--auto-accept", "--receive-dir", env.home("bob-recv")], environment: fast)
            defer { bob.stop() }
            _ = try env.pair(alice, bob, autoAccepted: true)
            let mine = env.home("docs") + "/notes.txt", theirs = env.home("bob-recv") + "/docs/notes.txt"
            try "original".write(toFile: mine, atomically: true, encoding: .utf8)
            let shared = try env.cli(alice, ["share", env.home("docs"), "--with", "bob"])
            try #require(shared.status == 0, "\(shared.stderr)")
            try FolderSyncTests.eventually("notes.txt reaches bob") { FileManager.default.fileExists(atPath: theirs) }
            // Both edit while apart: bob's edit is newer and wins; alice's becomes the conflict copy.
            let address = alice.address
            alice.stop()
            try "bob's edit".write(toFile: theirs, atomically: true, encoding: .utf8)
            try "alice's edit".write(toFile: mine, atomically: true, encoding: .utf8)
            try TestFiles.setMtime(mine, 1_700_000_000_000_000_000)
            alice = try DaemonProcess(env, name: "alice", home: alice.home, arguments: ["--gui", "off", "--auto-accept", "--receive-dir", env.home("alice-recv")],
                                      environment: fast, namespace: namespace.name, listen: address)
            defer { alice.stop() }
            let bobFolder = env.home("bob-recv") + "/docs"
            func copies() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: bobFolder)) ?? []).filter { $0.contains(".sync-conflict-") } }
            try FolderSyncTests.eventually("a conflict copy on bob", timeout: 45) { copies().count == 1 }
            let browser = try BrowserDriver(namespace: namespace)
            defer { browser.quit() }
            try browser.open(link)
            let item = "document.querySelector('#conflicts [data-path]')"
            let keepAlices = "[...\(item).querySelectorAll('button.keep-device')].find((b) => b.textContent === \"Keep alice's\")"
            try browser.waitUntil("the conflict on bob's page", "!!\(item) && !!\(keepAlices) && !!\(item).querySelector('button.keep-both')")
            try browser.screenshot("folders")
            // Keep alice's: her version (the copy) becomes the file on bob, and the copy goes.
            _ = try browser.eval("\(keepAlices).click(), true")
            try FolderSyncTests.eventually("the copy is gone and alice's version is the file on bob") {
                copies().isEmpty && (try? String(contentsOfFile: theirs, encoding: .utf8)) == "alice's edit"
            }
            try FolderSyncTests.eventually("and on alice") { (try? String(contentsOfFile: mine, encoding: .utf8)) == "alice's edit" }
            // bob's own edit, dropped, is kept in his versions store (a file of one chunk: the
            // chunk under .chunks holds its bytes).
            let kept = ((try? FileManager.default.subpathsOfDirectory(atPath: bob.home + "/versions")) ?? [])
                .filter { $0.hasPrefix(".chunks/") }.filter { (try? String(contentsOfFile: bob.home + "/versions/" + $0, encoding: .utf8)) == "bob's edit" }
            #expect(kept.count == 1, "\(kept)")
            try browser.waitUntil("no conflict left on the page", "!\(item)")
            try browser.screenshot("activity")
        }
    }

    /// What the page manages, each checked where a user would look (the daemon, the files):
    /// the activity log from before the page opened, this device's ID, a folder shared and a
    /// file sent from typed paths, the auto-accept switch, the folder's ignore patterns, pause
    /// and resume, rescan and unshare, and the log again after a reload.
    @Test func thePageSharesSendsSwitchesAndKeepsItsLog() throws {
        try Self.scene { env, namespace in
            for name in ["alice-recv", "docs"] { try FileManager.default.createDirectory(atPath: env.home(name), withIntermediateDirectories: true) }
            let alice = try DaemonProcess(env, name: "alice", arguments: ["--gui", "off", "--auto-accept", "--receive-dir", env.home("alice-recv")],
                                          namespace: namespace.name)
            defer { alice.stop() }
            let (bob, link) = try Self.daemon(env, "bob", in: namespace)
            defer { bob.stop() }
            _ = try env.pair(alice, bob)  // before any page is open
            let browser = try BrowserDriver(namespace: namespace)
            defer { browser.quit() }
            try browser.open(link)
            let log = "document.querySelector('#activity-log').textContent"
            try browser.waitUntil("the pairing, from before the page opened, in the log", "\(log).includes('alice connected')")
            let id = try #require((try JSONSerialization.jsonObject(with: Data(try env.cli(bob, ["id", "--json"]).stdout.utf8)) as? [String: Any])?["id"] as? String)
            try browser.waitUntil("bob's whole device ID", "document.querySelector('#device-id').textContent === '\(id)'")
            // Rename from the page: the CLI's id and the header say the new name.
            _ = try browser.eval("document.querySelector('#rename-name').value = 'bobby', document.querySelector('#rename-form button').click(), true")
            try FolderSyncTests.eventually("bob is called bobby") { ((try? env.cli(bob, ["id"]))?.stdout ?? "").contains("bobby") }
            try browser.waitUntil("the new name on the page", "document.querySelector('#device-name').textContent === 'bobby'")

            let docs = env.home("docs")
            try "notes".write(toFile: docs + "/notes.txt", atomically: true, encoding: .utf8)
            try browser.waitUntil("alice to share with", "[...document.querySelectorAll('#share-peer option')].some((o) => o.textContent === 'alice')")
            _ = try browser.eval("document.querySelector('#share-dir').value = '\(docs)', document.querySelector('#share-form button').click(), true")
            try FolderSyncTests.eventually("the folder reaches alice (she auto-accepts)", timeout: 30) {
                FileManager.default.fileExists(atPath: env.home("alice-recv") + "/docs/notes.txt")
            }
            let folder = "document.querySelector('#folder-list [data-folder]')"
            try browser.waitUntil("the folder on the page", "!!\(folder) && \(folder).textContent.includes('\(docs)')")

            let report = env.home("report.txt")
            try "quarterly figures".write(toFile: report, atomically: true, encoding: .utf8)
            _ = try browser.eval("document.querySelector('#send-path').value = '\(report)', document.querySelector('#send-form button').click(), true")
            try FolderSyncTests.eventually("report.txt reaches alice", timeout: 30) {
                (try? String(contentsOfFile: env.home("alice-recv") + "/report.txt", encoding: .utf8)) == "quarterly figures"
            }

            // A file dropped into the page: staged in bob's home (0600), then sent.
            _ = try browser.eval("""
                (() => { const dt = new DataTransfer(); dt.items.add(new File(['dropped bytes'], 'dropped.txt'));
                  document.querySelector('#send-form').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
                  return true; })()
                """)
            try FolderSyncTests.eventually("dropped.txt reaches alice", timeout: 30) {
                (try? String(contentsOfFile: env.home("alice-recv") + "/dropped.txt", encoding: .utf8)) == "dropped bytes"
            }
            let staged = ((try? FileManager.default.subpathsOfDirectory(atPath: bob.home + "/uploads")) ?? []).filter { $0.hasSuffix("/dropped.txt") }
            #expect(staged.count == 1, "\(staged)")
            let mode = (try? FileManager.default.attributesOfItem(atPath: bob.home + "/uploads/" + (staged.first ?? "")))?[.posixPermissions] as? Int
            #expect(mode == 0o600, "the staged copy has mode \(String(mode ?? 0, radix: 8))")

            let files = "document.querySelector('#peer-list button.auto-files')"
            try browser.waitUntil("alice's files switch, off", "!!\(files) && \(files).textContent === 'Auto-accept files: off'")
            _ = try browser.eval("\(files).click(), true")
            try FolderSyncTests.eventually("bob accepts alice's files without asking") {
                ((try? env.cli(bob, ["peers", "--json"]))?.stdout ?? "").contains("\"autoAccept\":true")
            }
            try browser.waitUntil("the switch on", "\(files).textContent === 'Auto-accept files: on'")
            // The peer's row says how the session reaches alice and its round trip.
            try browser.waitUntil("alice's path and round trip in her row",
                                  "/direct 127\\.0\\.0\\.1:\\d+.*\\d ms/.test(document.querySelector('#peer-list').textContent)")
            // The receive folder, changed on the page: what alice sends now lands there.
            let inbox = env.home("bob-inbox")
            _ = try browser.eval("document.querySelector('#receive-dir').value = '\(inbox)', document.querySelector('#receive-form button').click(), true")
            try browser.waitUntil("the new receive folder on the page", "document.querySelector('#device-receive').textContent === '\(inbox)'")
            let reply = env.home("reply.txt")
            try "thanks".write(toFile: reply, atomically: true, encoding: .utf8)
            let answered = try env.cli(alice, ["send", reply, "--to", "bob"])
            #expect(answered.status == 0, "\(answered.stderr)")
            #expect((try? String(contentsOfFile: inbox + "/reply.txt", encoding: .utf8)) == "thanks")

            // The folder's own ignore patterns, edited on the page: written to its root, and a
            // file they match stays here while the others sync.
            _ = try browser.eval("\(folder).querySelector('button.ignores').click(), true")
            try browser.waitUntil("the patterns editor", "!document.querySelector('#ignores-editor').hidden")
            _ = try browser.eval("document.querySelector('#ignores-text').value = '*.tmp\\n', document.querySelector('#ignores-editor button.ignores-save').click(), true")
            try FolderSyncTests.eventually("the patterns in the folder's .syncpeerignore") {
                (try? String(contentsOfFile: docs + "/.syncpeerignore", encoding: .utf8)) == "*.tmp\n"
            }
            try "scratch".write(toFile: docs + "/scratch.tmp", atomically: true, encoding: .utf8)
            try "kept".write(toFile: docs + "/kept.txt", atomically: true, encoding: .utf8)
            try FolderSyncTests.eventually("kept.txt reaches alice") { FileManager.default.fileExists(atPath: env.home("alice-recv") + "/docs/kept.txt") }
            #expect(!FileManager.default.fileExists(atPath: env.home("alice-recv") + "/docs/scratch.tmp"), "an ignored file was synced")
            #expect(!FileManager.default.fileExists(atPath: env.home("alice-recv") + "/docs/.syncpeerignore"), "the patterns were synced")

            // Pause: the CLI's status says paused, and a new file stays here until Resume.
            _ = try browser.eval("\(folder).querySelector('button.pause').click(), true")
            try FolderSyncTests.eventually("bob's folder paused") { ((try? env.cli(bob, ["status", "--json"]))?.stdout ?? "").contains("\"state\":\"paused\"") }
            try browser.waitUntil("paused on the page", "\(folder).querySelector('.state').textContent === 'paused' && !!\(folder).querySelector('button.resume-folder')")
            try "later".write(toFile: docs + "/later.txt", atomically: true, encoding: .utf8)
            Thread.sleep(forTimeInterval: 2)  // inotify's 1 s gathering, and more
            #expect(!FileManager.default.fileExists(atPath: env.home("alice-recv") + "/docs/later.txt"), "a paused folder synced")
            _ = try browser.eval("\(folder).querySelector('button.resume-folder').click(), true")
            try FolderSyncTests.eventually("later.txt reaches alice once resumed") { FileManager.default.fileExists(atPath: env.home("alice-recv") + "/docs/later.txt") }

            _ = try browser.eval("\(folder).querySelector('button.rescan').click(), true")
            try browser.waitUntil("the rescan answered", "document.querySelector('#notice').textContent.startsWith('Rescanning')")
            try browser.screenshot("manage")
            _ = try browser.eval("\(folder).querySelector('button.unshare').click(), true")
            try FolderSyncTests.eventually("bob no longer shares the folder") {
                !((try? env.cli(bob, ["status", "--json"]))?.stdout ?? "").contains(docs)
            }
            // A reload starts from the daemon's log: the send is still there.
            try browser.open(String(link.prefix { $0 != "?" }))
            try browser.waitUntil("the send in the log after a reload", "\(log).includes('report.txt to alice completed')")
            try browser.screenshot("activity-reload")
        }
    }

    /// A transfer that moves nothing says "stalled" on the page, as the CLI says, not the
    /// last rate and a time left; a lost link says "reconnecting…".
    @Test func aStalledTransferSaysStalledNotARate() throws {
        try Self.scene { env, namespace in
            // Bob waits long for a silent peer: the stall lasts, never turning into a lost link.
            let (bob, link) = try Self.daemon(env, "bob", in: namespace, arguments: ["--auto-accept"],
                                              environment: ["SYNCPEER_DEAD_PEER_MS": "120000"])
            defer { bob.stop() }
            let alice = try DaemonProcess(env, name: "alice", arguments: ["--gui", "off"], namespace: namespace.name)
            defer { kill(alice.pid, SIGCONT); alice.stop() }
            _ = try env.pair(alice, bob, autoAccepted: true)
            let browser = try BrowserDriver(namespace: namespace)
            defer { browser.quit() }
            try browser.open(link)
            try browser.waitUntil("the dashboard", "!!document.querySelector('#transfers')")
            let file = env.home("big.bin")
            try TestFiles.random(file, size: 400 << 20)
            let sent = try env.cli(alice, ["send", file, "--to", "bob", "--detach"])
            try #require(sent.status == 0, "\(sent.stderr)")
            let row = "document.querySelector('#running-list [data-transfer]')"
            try browser.waitUntil("bytes moving on bob's page", "!!\(row) && \(row).querySelector('.state').textContent === 'active' && \(row).querySelector('.bar').value > 0", timeout: 60)
            // The sender stops dead (as on a cut link): the page says stalled, as the CLI does,
            // and shows no rate or time left.
            kill(alice.pid, SIGSTOP)
            try browser.waitUntil("stalled on the page", "\(row).querySelector('.state').textContent === 'stalled'")
            #expect(try browser.eval("\(row).querySelector('.rate').textContent + \(row).querySelector('.eta').textContent") as? String == "")
            try browser.screenshot("stalled")
            // Then the sender is gone for good: the link is lost, and the page says what the
            // CLI says then, "reconnecting…".
            kill(alice.pid, SIGKILL)
            try browser.waitUntil("reconnecting on the page", "\(row).querySelector('.state').textContent === 'reconnecting…'")
        }
    }
}
