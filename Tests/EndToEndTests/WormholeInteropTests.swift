import Foundation
import Glibc
import Testing

/// `syncpeer send --code` / `syncpeer receive CODE` against the real Magic Wormhole client
/// (Debian's `wormhole` 0.12 and the current PyPI release), through a local mailbox server and
/// transit relay on 127.0.0.1 of a network namespace each test makes (`WormholeFixture`):
/// texts and files both ways, the file bytes compared, the transfer through the relay when
/// the direct hints are dead; a wrong code fails both ends and writes nothing.
@Suite(.serialized)
struct WormholeInteropTests {
    static let text = "Grüße from the other side — 7 words, one emoji 🙂"

    func withFixture(_ client: WormholeClient = .debian, _ body: (WormholeFixture) throws -> Void) throws {
        guard WormholeFixture.available else {
            Issue.record(Comment(rawValue: WormholeFixture.missingReason))
            return
        }
        guard TestNetns.available else {
            Issue.record(Comment(rawValue: TestNetns.unavailableReason))
            return
        }
        let fixture = try WormholeFixture(client: client, namespace: true)
        defer { fixture.stop() }
        try body(fixture)
    }

    @Test(arguments: WormholeClient.allCases) func textFromSyncpeerToWormhole(_ client: WormholeClient) throws {
        try withFixture(client) { f in
            let sender = try f.syncpeer(["send", "--code", "--text", Self.text] + f.syncpeerServers)
            let code = try sender.code()
            #expect(sender.stderr.contains("wormhole receive \(code)"), "the sender says how to receive")
            let receiver = try f.wormhole("receive", [code])
            #expect(receiver.wait() == 0, "wormhole receive: \(receiver.stderr)")
            #expect(sender.wait() == 0, "syncpeer send: \(sender.stderr)")
            #expect(receiver.stdout == Self.text + "\n")
        }
    }

    @Test(arguments: WormholeClient.allCases) func textFromWormholeToSyncpeer(_ client: WormholeClient) throws {
        try withFixture(client) { f in
            let sender = try f.wormhole("send", ["--text", Self.text])
            let code = try sender.code()
            let receiver = try f.syncpeer(["receive", code] + f.syncpeerServers)
            #expect(receiver.wait() == 0, "syncpeer receive: \(receiver.stderr)")
            #expect(sender.wait() == 0, "wormhole send: \(sender.stderr)")
            #expect(receiver.stdout == Self.text + "\n")
            #expect(sender.stderr.contains("text message sent"))
        }
    }

    /// 100 MiB of random bytes each way, through the relay (neither side offers a direct
    /// address): the received file is byte-identical, and both ends report success only
    /// after the receiver's SHA-256 ack.
    @Test(arguments: WormholeClient.allCases) func filesBothWaysThroughTheRelay(_ client: WormholeClient) throws {
        try withFixture(client) { f in
            let source = try f.directory("source"), inbox = try f.directory("inbox"), wormholeInbox = try f.directory("wormhole-inbox")
            let original = try #require(FileHandle(forReadingAtPath: "/dev/urandom")).readData(ofLength: 100 << 20)
            let path = source + "/report 2026.bin"
            try original.write(to: URL(fileURLWithPath: path))

            let wormholeSender = try f.wormhole("send", [path])
            let receiver = try f.syncpeer(["receive", try wormholeSender.code(), "--dir", inbox] + f.syncpeerServers)
            #expect(receiver.wait() == 0, "syncpeer receive: \(receiver.stderr)")
            #expect(wormholeSender.wait() == 0, "wormhole send: \(wormholeSender.stderr)")
            #expect(wormholeSender.stderr.contains("Confirmation received"), "the sender got a matching hash: \(wormholeSender.stderr)")
            #expect(receiver.stderr.contains("(relay 127.0.0.1:\(f.relayPort))"), "through the relay: \(receiver.stderr)")
            #expect(FileManager.default.contents(atPath: inbox + "/report 2026.bin") == original)
            #expect(try FileManager.default.contentsOfDirectory(atPath: inbox) == ["report 2026.bin"], "no partial file left")

            let sender = try f.syncpeer(["send", path, "--code"] + f.syncpeerServers)
            let wormholeReceiver = try f.wormhole("receive", ["--accept-file", try sender.code()], in: wormholeInbox)
            #expect(wormholeReceiver.wait() == 0, "wormhole receive: \(wormholeReceiver.stderr)")
            #expect(sender.wait() == 0, "syncpeer send: \(sender.stderr)")
            #expect(sender.stderr.contains("(relay 127.0.0.1:\(f.relayPort))"), "through the relay: \(sender.stderr)")
            #expect(FileManager.default.contents(atPath: wormholeInbox + "/report 2026.bin") == original)
        }
    }

    /// Both ends offer direct hints nobody can reach, and each transfer still completes through
    /// the relay, in bounded time. The namespace gets a second address (10.77.0.1 on a veth
    /// pair of its own) whose every TCP packet nftables drops and counts; `wormhole` listens (no
    /// `--no-listen`) and offers that address as its direct hint (it leaves out 127.0.0.1 when it
    /// has another); syncpeer offers none (it does not listen). Our connector must try the dead
    /// hint (the counter moves) and race the relay beside it rather than wait on it: the connect
    /// timeout is 10 s, the bound here 60 s for a 2 MiB file.
    @Test(arguments: WormholeClient.allCases) func throughTheRelayWhenDirectHintsAreDead(_ client: WormholeClient) throws {
        try withFixture(client) { f in
            try f.ip(["link", "add", "dead0", "type", "veth", "peer", "name", "dead1"])
            try f.ip(["addr", "add", "10.77.0.1/24", "dev", "dead0"])
            for link in ["dead0", "dead1"] { try f.ip(["link", "set", link, "up"]) }
            func nft(_ arguments: [String]) throws -> String {
                let (launched, launchArguments) = f.command("/usr/sbin/nft", arguments)
                let result = try SyncpeerRunner.runProgram(launched, launchArguments)
                try #require(result.status == 0, "nft \(arguments.joined(separator: " ")): \(result.stderr)")
                return result.stdout
            }
            _ = try nft(["add", "table", "inet", "dead"])
            _ = try nft(["add", "chain", "inet", "dead", "input", "{", "type", "filter", "hook", "input", "priority", "0", ";", "}"])
            _ = try nft(["add", "rule", "inet", "dead", "input", "ip", "daddr", "10.77.0.1", "meta", "l4proto", "tcp", "counter", "drop"])
            func dropped() throws -> Int {
                let listing = try nft(["list", "chain", "inet", "dead", "input"])
                return Int(try #require(listing.firstMatch(of: /counter packets (\d+)/)?.1, "\(listing)")) ?? 0
            }
            let source = try f.directory("source"), inbox = try f.directory("inbox"), wormholeInbox = try f.directory("wormhole-inbox")
            let original = try #require(FileHandle(forReadingAtPath: "/dev/urandom")).readData(ofLength: 2 << 20)
            let path = source + "/dead-hints.bin"
            try original.write(to: URL(fileURLWithPath: path))

            var start = Date()
            let wormholeSender = try f.wormhole("send", [path], listen: true)
            let receiver = try f.syncpeer(["receive", try wormholeSender.code(), "--dir", inbox] + f.syncpeerServers)
            #expect(receiver.wait() == 0, "syncpeer receive: \(receiver.stderr)")
            #expect(Date().timeIntervalSince(start) < 60, "a dead hint held the transfer up")
            #expect(wormholeSender.wait() == 0, "wormhole send: \(wormholeSender.stderr)")
            #expect(receiver.stderr.contains("(relay 127.0.0.1:\(f.relayPort))"), "through the relay: \(receiver.stderr)")
            #expect(FileManager.default.contents(atPath: inbox + "/dead-hints.bin") == original)
            let afterReceive = try dropped()
            #expect(afterReceive > 0, "syncpeer receive tried wormhole's dead direct hint")

            start = Date()
            let sender = try f.syncpeer(["send", path, "--code"] + f.syncpeerServers)
            let wormholeReceiver = try f.wormhole("receive", ["--accept-file", try sender.code()], in: wormholeInbox, listen: true)
            #expect(sender.wait() == 0, "syncpeer send: \(sender.stderr)")
            #expect(Date().timeIntervalSince(start) < 60, "a dead hint held the transfer up")
            #expect(wormholeReceiver.wait() == 0, "wormhole receive: \(wormholeReceiver.stderr)")
            #expect(sender.stderr.contains("(relay 127.0.0.1:\(f.relayPort))"), "through the relay: \(sender.stderr)")
            #expect(FileManager.default.contents(atPath: wormholeInbox + "/dead-hints.bin") == original)
            #expect(try dropped() > afterReceive, "syncpeer send tried wormhole's dead direct hint")
        }
    }

    /// A folder with nested files, an empty folder and an executable, both ways: Magic
    /// Wormhole's zip unpacked by syncpeer, syncpeer's zip unpacked by `wormhole`; the trees
    /// and modes match.
    @Test(arguments: WormholeClient.allCases) func foldersBothWays(_ client: WormholeClient) throws {
        try withFixture(client) { f in
            let source = try f.directory("source/album"), inbox = try f.directory("inbox"), wormholeInbox = try f.directory("wormhole-inbox")
            try FileManager.default.createDirectory(atPath: source + "/2026/june", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: source + "/empty", withIntermediateDirectories: true)
            let noise = Data((0..<400_000).map { _ in UInt8.random(in: 0...255) })
            try noise.write(to: URL(fileURLWithPath: source + "/2026/june/photo.raw"))
            try Data(String(repeating: "compressible line\n", count: 20_000).utf8).write(to: URL(fileURLWithPath: source + "/2026/notes.txt"))
            try Data("#!/bin/sh\necho hi\n".utf8).write(to: URL(fileURLWithPath: source + "/run.sh"))
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: source + "/run.sh")

            func same(_ received: String) throws {
                for file in ["2026/june/photo.raw", "2026/notes.txt", "run.sh"] {
                    #expect(FileManager.default.contents(atPath: received + "/" + file) == FileManager.default.contents(atPath: source + "/" + file), "\(file)")
                }
                #expect(try FileManager.default.attributesOfItem(atPath: received + "/run.sh")[.posixPermissions] as? Int == 0o755)
            }

            let wormholeSender = try f.wormhole("send", [source])
            let receiver = try f.syncpeer(["receive", try wormholeSender.code(), "--dir", inbox] + f.syncpeerServers)
            #expect(receiver.wait() == 0, "syncpeer receive: \(receiver.stderr)")
            #expect(wormholeSender.wait() == 0, "wormhole send: \(wormholeSender.stderr)")
            try same(inbox + "/album")
            #expect(try FileManager.default.contentsOfDirectory(atPath: inbox) == ["album"], "no partial file left")

            let sender = try f.syncpeer(["send", source, "--code"] + f.syncpeerServers)
            let wormholeReceiver = try f.wormhole("receive", ["--accept-file", try sender.code()], in: wormholeInbox)
            #expect(wormholeReceiver.wait() == 0, "wormhole receive: \(wormholeReceiver.stderr)")
            #expect(sender.wait() == 0, "syncpeer send: \(sender.stderr)")
            try same(wormholeInbox + "/album")
            var isDirectory: ObjCBool = false
            #expect(FileManager.default.fileExists(atPath: wormholeInbox + "/album/empty", isDirectory: &isDirectory) && isDirectory.boolValue)
        }
    }

    /// A folder of 65,540 small files (66 subfolders) both ways: past 65,535 entries Python's
    /// zipfile writes zip64 (`wormhole send`), which we unpack; we write zip64 in turn, which
    /// `wormhole receive` unpacks. Every file arrives with its bytes.
    @Test func zip64FoldersBothWays() throws {
        try withFixture { f in
            let source = try f.directory("source/many"), inbox = try f.directory("inbox"), wormholeInbox = try f.directory("wormhole-inbox")
            let count = 65_540, perFolder = 1_000, folders = (count + perFolder - 1) / perFolder
            // Plain system calls: 65,540 expectations or FileManager calls cost minutes here.
            for index in 0..<count {
                let folder = source + "/d\(index / perFolder)"
                if index % perFolder == 0 { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
                let fd = open(folder + "/f\(index)", O_WRONLY | O_CREAT | O_EXCL, 0o644)
                let text = Array("\(index)\n".utf8)
                let written = fd >= 0 ? write(fd, text, text.count) : -1
                if fd >= 0 { close(fd) }
                guard written == text.count else { throw WormholeFixture.Failure(description: "cannot write file \(index)") }
            }
            func same(_ received: String) throws {
                var files = 0
                for folder in 0..<folders { files += try FileManager.default.contentsOfDirectory(atPath: received + "/d\(folder)").count }
                #expect(files == count, "every file arrived")
                for index in stride(from: 0, to: count, by: 997) + [count - 1] {
                    let name = "/d\(index / perFolder)/f\(index)"
                    #expect(FileManager.default.contents(atPath: received + name) == Data("\(index)\n".utf8), "\(name)")
                }
            }

            let wormholeSender = try f.wormhole("send", [source])
            let receiver = try f.syncpeer(["receive", try wormholeSender.code(), "--dir", inbox] + f.syncpeerServers)
            #expect(receiver.wait() == 0, "syncpeer receive: \(receiver.stderr)")
            #expect(wormholeSender.wait() == 0, "wormhole send: \(wormholeSender.stderr)")
            try same(inbox + "/many")

            let sender = try f.syncpeer(["send", source, "--code"] + f.syncpeerServers)
            let wormholeReceiver = try f.wormhole("receive", ["--accept-file", try sender.code()], in: wormholeInbox)
            #expect(wormholeReceiver.wait() == 0, "wormhole receive: \(wormholeReceiver.stderr)")
            #expect(sender.wait() == 0, "syncpeer send: \(sender.stderr)")
            try same(wormholeInbox + "/many")
            // rm removes 200,000 files in seconds; Foundation's recursive removal (the fixture's) takes far longer.
            _ = try? SyncpeerRunner.runProgram("/bin/rm", ["-rf", source, inbox, wormholeInbox])
        }
    }

    /// Ctrl-C during a transfer: syncpeer tells the other side and exits 130, and leaves no
    /// partial file; `wormhole send` fails. The sender is paused (SIGSTOP) once the bytes flow,
    /// so the cut lands mid-transfer.
    @Test func ctrlCTellsTheOtherSideAndLeavesNothing() throws {
        try withFixture { f in
            let source = try f.directory("source"), inbox = try f.directory("inbox")
            let random = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
            try random.readData(ofLength: 64 << 20).write(to: URL(fileURLWithPath: source + "/big.bin"))
            let wormholeSender = try f.wormhole("send", [source + "/big.bin"])
            let receiver = try f.syncpeer(["receive", try wormholeSender.code(), "--dir", inbox] + f.syncpeerServers)
            let deadline = Date().addingTimeInterval(60)
            while !receiver.stderr.contains("Receiving big.bin") && receiver.process.isRunning && Date() < deadline { usleep(20_000) }
            kill(wormholeSender.process.processIdentifier, SIGSTOP)
            usleep(300_000)
            kill(receiver.process.processIdentifier, SIGINT)
            let status = receiver.wait()
            kill(wormholeSender.process.processIdentifier, SIGCONT)
            #expect(status == 130, "syncpeer receive: \(receiver.stderr)")
            #expect(receiver.stderr.contains("Cancelled; the other side was told."))
            #expect(wormholeSender.wait() != 0, "wormhole send: \(wormholeSender.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: inbox).isEmpty, "no partial file left")
        }
    }

    /// On a terminal the receiver draws a live line in place (percent, bytes of the total,
    /// rate) and ends with the summary.
    @Test func liveProgressLineOnATerminal() throws {
        try withFixture { f in
            let source = try f.directory("source"), inbox = try f.directory("inbox")
            try #require(FileHandle(forReadingAtPath: "/dev/urandom")).readData(ofLength: 3_000_000).write(to: URL(fileURLWithPath: source + "/clip.bin"))
            let wormholeSender = try f.wormhole("send", [source + "/clip.bin"])
            let terminal = try PseudoTerminal(["receive", try wormholeSender.code(), "--dir", inbox] + f.syncpeerServers,
                                              environment: ["PATH": "/usr/bin:/bin", "HOME": f.runner.root.path, "SYNCPEER_INTERFACE": "lo"],
                                              launch: f.command)
            #expect(terminal.wait() == 0, "\(terminal.raw)")
            #expect(wormholeSender.wait() == 0)
            #expect(terminal.raw.contains("\r\u{1B}[K100%  3.0 MB of 3.0 MB  "), "\(terminal.raw)")
            #expect(terminal.raw.contains("MB/s"))
            #expect(PseudoTerminal.plain(terminal.raw).contains("Received → \(inbox)/clip.bin"), "\(terminal.raw)")
        }
    }

    @Test func syncpeerToSyncpeer() throws {
        try withFixture { f in
            let source = try f.directory("source"), inbox = try f.directory("inbox")
            let original = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            try original.write(to: URL(fileURLWithPath: source + "/a.bin"))
            let sender = try f.syncpeer(["send", source + "/a.bin", "--code"] + f.syncpeerServers)
            let receiver = try f.syncpeer(["receive", try sender.code(), "--dir", inbox] + f.syncpeerServers)
            #expect(receiver.wait() == 0, "syncpeer receive: \(receiver.stderr)")
            #expect(sender.wait() == 0, "syncpeer send: \(sender.stderr)")
            #expect(FileManager.default.contents(atPath: inbox + "/a.bin") == original)
        }
    }

    /// The right nameplate with the wrong words: SPAKE2 gives each side a different key, the
    /// version messages do not open, both ends stop with a clear message, nothing is written.
    @Test(arguments: WormholeClient.allCases) func wrongCodeFailsBothEnds(_ client: WormholeClient) throws {
        try withFixture(client) { f in
            let sender = try f.syncpeer(["send", "--code", "--text", "secret"] + f.syncpeerServers)
            let nameplate = try sender.code().split(separator: "-")[0]
            let receiver = try f.wormhole("receive", ["\(nameplate)-aardvark-absurd"])
            #expect(receiver.wait() != 0)
            #expect(sender.wait() == 1)
            #expect(receiver.stderr.contains("Key confirmation failed"), "wormhole: \(receiver.stderr)")
            #expect(sender.stderr.contains("key confirmation failed"), "syncpeer: \(sender.stderr)")
            #expect(!receiver.stdout.contains("secret"))

            let source = try f.directory("source"), inbox = try f.directory("inbox")
            try Data("private".utf8).write(to: URL(fileURLWithPath: source + "/p.txt"))
            let wormholeSender = try f.wormhole("send", [source + "/p.txt"])
            let code = try wormholeSender.code()
            let syncpeerReceiver = try f.syncpeer(["receive", "\(code.split(separator: "-")[0])-wrong-words", "--dir", inbox] + f.syncpeerServers)
            #expect(syncpeerReceiver.wait() == 1)
            #expect(wormholeSender.wait() != 0)
            #expect(syncpeerReceiver.stderr.contains("key confirmation failed"), "syncpeer: \(syncpeerReceiver.stderr)")
            #expect(wormholeSender.stderr.contains("Key confirmation failed"), "wormhole: \(wormholeSender.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: inbox).isEmpty, "nothing written")
        }
    }
}
