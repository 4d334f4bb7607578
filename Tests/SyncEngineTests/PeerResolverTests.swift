import Testing
@testable import SyncEngine
import PeerCrypto

struct PeerResolverTests {
    static let alice = PeerResolver.Candidate(deviceID: "AAAAAAA-BBBBBBB-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH", name: "alice", addresses: ["127.0.0.1:5000"])
    static let bob1 = PeerResolver.Candidate(deviceID: "BBBBBBB-AAAAAAA-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH", name: "bob", addresses: [])
    static let bob2 = PeerResolver.Candidate(deviceID: "BBBBCCC-AAAAAAA-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH", name: "bob", addresses: [])
    static let all = [alice, bob1, bob2]

    @Test(arguments: [
        ("alice", PeerResolver.Resolution.peer(alice)),
        ("AAAAAAA", .peer(alice)),
        ("aaaa-aaab", .peer(alice)),
        ("BBBBBBB-A", .peer(bob1)),
        ("127.0.0.1:5000", .peer(alice)),
        ("127.0.0.1:6000", .address("127.0.0.1:6000")),
        ("[::1]:6000", .address("[::1]:6000")),
    ])
    func resolves(_ text: String, _ expected: PeerResolver.Resolution) throws {
        #expect(try PeerResolver.resolve(text, among: Self.all) == expected)
    }

    @Test func ambiguousNameListsCandidates() {
        #expect(throws: PeerResolver.Failure.ambiguous("bob", [Self.bob1, Self.bob2])) {
            try PeerResolver.resolve("bob", among: Self.all)
        }
        let message = PeerResolver.Failure.ambiguous("bob", [Self.bob1, Self.bob2]).description
        #expect(message == "'bob' matches 2 peers: bob (BBBBBBB), bob (BBBBCCC); use a device ID (or a longer prefix) instead")
    }

    @Test func ambiguousPrefix() {
        #expect(throws: PeerResolver.Failure.ambiguous("BBBB", [Self.bob1, Self.bob2])) {
            try PeerResolver.resolve("BBBB", among: Self.all)
        }
    }

    @Test(arguments: ["carol", "AAA", "ZZZZZZZ", ""])
    func unknown(_ text: String) {
        #expect(throws: PeerResolver.Failure.self) { try PeerResolver.resolve(text, among: Self.all) }
    }
}

/// Issue 13 point 4, peers by name, forgivingly: what a user who mistypes gets.
struct ForgivingNameTests {
    static let bob = PeerResolver.Candidate(deviceID: "BBBBBBB-AAAAAAA-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH", name: "Bob", addresses: [])
    static let laptop = PeerResolver.Candidate(deviceID: "LLLLLLL-AAAAAAA-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH", name: "laptop", addresses: [])

    @Test func caseIsIgnoredWhenThatIsUnambiguous() throws {
        #expect(try PeerResolver.resolve("bob", among: [Self.bob, Self.laptop]) == .peer(Self.bob))
        #expect(try PeerResolver.resolve("LAPTOP", among: [Self.bob, Self.laptop]) == .peer(Self.laptop))
        let other = PeerResolver.Candidate(deviceID: "CCCCCCC-AAAAAAA-CCCCCCC-DDDDDDD-EEEEEEE-FFFFFFF-GGGGGGG-HHHHHHH", name: "BOB", addresses: [])
        #expect(throws: PeerResolver.Failure.ambiguous("bob", [Self.bob, other])) {
            try PeerResolver.resolve("bob", among: [Self.bob, other])
        }
        // The exact spelling wins over another case.
        #expect(try PeerResolver.resolve("BOB", among: [Self.bob, other]) == .peer(other))
    }

    @Test(arguments: [("bbo", ["Bob"]), ("lpatop", ["laptop"]), ("laptp", ["laptop"]), ("bo", ["Bob"])])
    func aTypoGetsDidYouMean(_ typed: String, _ names: [String]) {
        #expect(throws: PeerResolver.Failure.didYouMean(typed, names)) { try PeerResolver.resolve(typed, among: [Self.bob, Self.laptop]) }
        #expect(PeerResolver.Failure.didYouMean(typed, names).description == "no peer is called '\(typed)'; did you mean \(names[0])?")
    }

    @Test func aNearbyNodeThatIsNotPairedSaysHowToPair() {
        #expect(throws: PeerResolver.Failure.nearbyNotPaired("carol")) {
            try PeerResolver.resolve("Carol", among: [Self.bob], nearby: ["carol"])
        }
        #expect(PeerResolver.Failure.nearbyNotPaired("carol").description == "carol is nearby but not paired: syncpeer pair carol")
        // A typo of a nearby name is a suggestion too.
        #expect(throws: PeerResolver.Failure.didYouMean("carl", ["carol"])) { try PeerResolver.resolve("carl", among: [Self.bob], nearby: ["carol"]) }
    }

    @Test func aDeviceIDWithAWrongCheckCharacterSaysSo() throws {
        let real = DeviceID(publicKey: KeyPair.generate().publicKey).description
        // Change one character of the first group: its check character no longer matches.
        var characters = Array(real)
        characters[0] = characters[0] == "A" ? "B" : "A"
        let typo = String(characters)
        do {
            _ = try PeerResolver.resolve(typo, among: [Self.bob])
            Issue.record("a mistyped device ID resolved")
        } catch {
            guard case let .badDeviceID(text, reason) = error else { Issue.record("\(error)"); return }
            #expect(text == typo)
            #expect(reason.contains("check character 1 of 4 does not match"), "\(reason)")
            #expect(error.description.hasPrefix("'\(typo)' is not a valid device ID: "))
        }
        // The real one is no error of that kind (it is simply not a known peer).
        #expect(throws: PeerResolver.Failure.unknown(real)) { try PeerResolver.resolve(real, among: [Self.bob]) }
    }
}

/// Issue 13 point 3: the receive folder a desktop user expects.
struct UserDirsTests {
    @Test(arguments: [
        ("XDG_DOWNLOAD_DIR=\"$HOME/Téléchargements\"\n", "/home/u/Téléchargements"),
        ("# comment\nXDG_DESKTOP_DIR=\"$HOME/Desktop\"\n  XDG_DOWNLOAD_DIR=\"${HOME}/dl\"\n", "/home/u/dl"),
        ("XDG_DOWNLOAD_DIR=\"/data/incoming\"\n", "/data/incoming"),
    ])
    func theDownloadFolderComesFromUserDirs(_ contents: String, _ expected: String) {
        #expect(UserDirs.downloadDirectory(userDirs: contents, home: "/home/u") == expected)
    }

    @Test(arguments: ["XDG_DOWNLOAD_DIR=\"$HOME/\"\n", "XDG_DOWNLOAD_DIR=\"relative/dir\"\n", "XDG_MUSIC_DIR=\"$HOME/Music\"\n", ""])
    func unusableOrMissingEntriesFallBack(_ contents: String) {
        #expect(UserDirs.downloadDirectory(userDirs: contents, home: "/home/u") == nil)
        #expect(UserDirs.downloadDirectory(environment: ["HOME": "/home/u"], read: { _ in contents }) == "/home/u/Downloads")
    }

    @Test func xdgConfigHomeIsWhereTheFileIs() {
        var asked: [String] = []
        let found = UserDirs.downloadDirectory(environment: ["HOME": "/home/u", "XDG_CONFIG_HOME": "/cfg"]) { path in
            asked.append(path)
            return "XDG_DOWNLOAD_DIR=\"$HOME/In\"\n"
        }
        #expect(found == "/home/u/In" && asked == ["/cfg/user-dirs.dirs"])
    }
}
