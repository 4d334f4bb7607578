import Foundation
import Glibc
import Testing

/// `syncpeer init`, `id`, `--version` and bad input, run as real processes.
@Suite(.serialized)
struct InitAndIdTests {
    static var idPattern: Regex<(Substring, Substring)> { #/^[A-Z2-7]{7}(-[A-Z2-7]{7}){7}$/# }

    @Test func initThenIdJSONGivesAValidIDAndPrivateKeyFile() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let home = env.home("a")

        let first = try env.run(["--home", home, "init", "--name", "alice"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.hasPrefix("Created a new identity in \(home)\n"))

        let id = try env.run(["id", "--json", "--home", home])
        #expect(id.status == 0)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(id.stdout.utf8)) as? [String: String])
        #expect(object.keys.sorted() == ["certificateID", "id", "name"])
        #expect(object["name"] == "alice")
        let deviceID = try #require(object["id"])
        #expect(deviceID.wholeMatch(of: Self.idPattern) != nil, "\(deviceID)")
        #expect(id.stdout.hasSuffix("}\n"))
        #expect(first.stdout.contains("Device ID: \(deviceID)\n"))

        let attributes = try FileManager.default.attributesOfItem(atPath: home + "/identity.key")
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let homeAttributes = try FileManager.default.attributesOfItem(atPath: home)
        #expect((homeAttributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)

        // The certificate ID (Syncthing's form, for relays and discovery servers) is another ID.
        let certificateID = try #require(object["certificateID"])
        #expect(certificateID.wholeMatch(of: Self.idPattern) != nil && certificateID != deviceID, "\(certificateID)")

        // Text form: the ID then the name; then the certificate ID.
        let plain = try env.run(["id"], environment: ["SYNCPEER_HOME": home])
        #expect(plain.stdout == "\(deviceID)  alice\ncertificate ID \(certificateID) (relays, global discovery)\n")
    }

    @Test func secondInitKeepsTheIdentityAndSaysSo() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let home = env.home("a")
        try env.run(["--home", home, "init", "--name", "one"])
        let before = try env.run(["--home", home, "id"]).stdout
        let keyBefore = try Data(contentsOf: URL(fileURLWithPath: home + "/identity.key"))

        let again = try env.run(["--home", home, "init"])
        #expect(again.status == 0)
        #expect(again.stdout.hasPrefix("Already initialised in \(home): keeping the existing identity\n"))
        #expect(try env.run(["--home", home, "id"]).stdout == before)

        let renamed = try env.run(["--home", home, "init", "--name", "two"])
        #expect(renamed.stdout.contains("Display name changed to two\n"))
        let after = try env.run(["--home", home, "id"]).stdout
        #expect(after == before.replacingOccurrences(of: "  one\n", with: "  two\n"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: home + "/identity.key")) == keyBefore)
    }

    @Test func twoHomesHaveDifferentIDs() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        try env.run(["--home", env.home("a"), "init", "--name", "a"])
        try env.run(["--home", env.home("b"), "init", "--name", "b"])
        let a = try env.run(["--home", env.home("a"), "id"]).stdout
        let b = try env.run(["--home", env.home("b"), "id"]).stdout
        #expect(a != b)
    }

    @Test func versionFlag() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let result = try env.run(["--version"])
        #expect(result.status == 0)
        #expect(result.stdout.wholeMatch(of: #/syncpeer \d+\.\d+\.\d+\n/#) != nil)
    }

    struct BadInput: Sendable, CustomTestStringConvertible {
        let name: String
        let setup: @Sendable (String) throws -> Void
        let arguments: [String]
        let status: Int32
        let stderr: String
        var testDescription: String { name }
    }

    static let badInputs: [BadInput] = [
        BadInput(name: "unknown flag", setup: { _ in }, arguments: ["init", "--nmae", "x"], status: 2,
                 stderr: "syncpeer: error: unknown option '--nmae' for 'syncpeer init'; did you mean '--name'?\n"),
        BadInput(name: "64-byte name", setup: { _ in }, arguments: ["init", "--name", String(repeating: "x", count: 64)], status: 2,
                 stderr: "syncpeer: error: invalid display name: it is 64 bytes of UTF-8; at most 63 are allowed\n"),
        BadInput(name: "empty name", setup: { _ in }, arguments: ["init", "--name", ""], status: 2,
                 stderr: "syncpeer: error: invalid display name: it is empty\n"),
        BadInput(name: "id before init", setup: { _ in }, arguments: ["id"], status: 3,
                 stderr: "syncpeer: error: no identity in HOME: run 'syncpeer init' first\n"),
        BadInput(name: "key file readable by others", setup: { home in
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: home + "/identity.key")
        }, arguments: ["id"], status: 4,
                 stderr: "syncpeer: error: key file HOME/identity.key has mode 644; it must be readable by its owner only: run 'chmod 600 HOME/identity.key'\n"),
        BadInput(name: "corrupt key file", setup: { home in
            let path = home + "/identity.key"
            var text = try String(contentsOfFile: path, encoding: .utf8)
            // Flip one hex digit of the private key.
            let range = try #require(text.range(of: "x25519-private "))
            let i = range.upperBound
            text.replaceSubrange(i...i, with: text[i] == "0" ? "1" : "0")
            try text.write(toFile: path, atomically: false, encoding: .utf8)
        }, arguments: ["id"], status: 4,
                 stderr: "syncpeer: error: key file HOME/identity.key is corrupt (the private key does not match the public key (the file is damaged)); restore it from a backup, or move it away and run 'syncpeer init' to create a new identity (peers will have to pair again)\n"),
        BadInput(name: "truncated key file", setup: { home in
            let path = home + "/identity.key"
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            try data.prefix(40).write(to: URL(fileURLWithPath: path))
        }, arguments: ["id"], status: 4,
                 stderr: "syncpeer: error: key file HOME/identity.key is corrupt (the private or public key line is missing); restore it from a backup, or move it away and run 'syncpeer init' to create a new identity (peers will have to pair again)\n"),
    ]

    @Test(arguments: badInputs)
    func badInputGivesOneClearLine(_ bad: BadInput) throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let home = env.home("n")
        if bad.name != "id before init" && !bad.arguments.contains("init") {
            #expect(try env.run(["--home", home, "init", "--name", "n"]).status == 0)
        }
        try bad.setup(home)
        let keyBefore = try? Data(contentsOf: URL(fileURLWithPath: home + "/identity.key"))
        let result = try env.run(["--home", home] + bad.arguments)
        #expect(result.status == bad.status)
        #expect(result.stderr == bad.stderr.replacingOccurrences(of: "HOME", with: home))
        #expect(result.stdout == "")
        // Nothing was replaced.
        #expect((try? Data(contentsOf: URL(fileURLWithPath: home + "/identity.key"))) == keyBefore)
    }

    @Test(arguments: ["garbage", "text", "empty"])
    func corruptIndexIsAClearErrorAndIsNotOverwritten(kind: String) throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let home = env.home("n")
        #expect(try env.run(["--home", home, "init", "--name", "n"]).status == 0)
        let index = URL(fileURLWithPath: home + "/index.db")
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: index.path + suffix) }
        let junk: Data = switch kind {
        case "text": Data(String(repeating: "this is not a database\n", count: 300).utf8)
        case "empty": Data()   // a failed copy, a disk that lost it: not a fresh start
        default: Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 7919 &+ 13) })
        }
        try junk.write(to: index)

        for arguments in [["id"], ["init"], ["init", "--name", "m"]] {
            let result = try env.run(["--home", home] + arguments)
            #expect(result.status == 4, "\(arguments)")
            #expect(result.stderr.hasPrefix("syncpeer: error: "))
            #expect(result.stderr.contains(index.path))
            #expect(result.stderr.filter { $0 == "\n" }.count == 1, "one line: \(result.stderr)")
            #expect(try Data(contentsOf: index) == junk, "the index file was modified")
        }
    }

    /// A key file the user does not own (another user could replace it, and with it our
    /// identity) is refused, and so is a link in its place; nothing is replaced.
    @Test(.enabled(if: geteuid() == 0, "changing a file's owner needs root"))
    func aKeyFileOfAnotherUserIsRefused() throws {
        let env = try SyncpeerRunner()
        defer { env.cleanup() }
        let home = env.home("n")
        #expect(try env.run(["--home", home, "init", "--name", "n"]).status == 0)
        let key = home + "/identity.key"
        let before = try Data(contentsOf: URL(fileURLWithPath: key))
        #expect(chown(key, 65_534, 65_534) == 0)
        for arguments in [["id"], ["init"], ["init", "--name", "m"]] {
            let result = try env.run(["--home", home] + arguments)
            #expect(result.status == 4, "\(arguments): \(result.stderr)")
            #expect(result.stderr == "syncpeer: error: key file \(key) belongs to user 65534, not to you (user 0); it is refused because its owner could replace your identity: use your own home (--home or SYNCPEER_HOME), or if the file is yours run 'chown 0 \(key)'\n", "\(arguments)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: key)) == before)
        }

        // A link to a key file elsewhere is not followed.
        #expect(chown(key, 0, 0) == 0)
        try FileManager.default.moveItem(atPath: key, toPath: env.home("elsewhere.key"))
        try FileManager.default.createSymbolicLink(atPath: key, withDestinationPath: env.home("elsewhere.key"))
        let linked = try env.run(["--home", home, "id"])
        #expect(linked.status == 4, "\(linked.stderr)")
        #expect(linked.stderr.contains("it is a symbolic link"), "\(linked.stderr)")
    }
}
