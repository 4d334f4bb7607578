import PeerWire
import Testing
import TestKit

/// Feeds the decoders random and mutated input from a seeded generator (the same inputs on
/// every run). Every input must give valid values or a typed `WireError`: never a crash, a hang
/// or a value that does not survive re-encoding.
///
/// The checks use plain `if` and record at most a few issues per test, so that 100,000+ inputs
/// stay fast in a debug build.
@Suite struct FuzzTests {
    static let randomInputCount = 100_000
    static let mutationCount = 30_000

    @Test func randomInputsIntoAllDecoders() {
        // Seed 0x5EED_0001 stopped reaching `trailingBytes` once the certificate, resent and
        // version frames joined the draw; 0x5EED_0003 reaches every kind (as do 4 and 5).
        var rng = SplitMix64(seed: 0x5EED_0003)
        var checker = Checker()
        for index in 0..<Self.randomInputCount {
            let input: [UInt8]
            switch index % 5 {
            case 0: input = randomBytes(Int.random(in: 0...300, using: &rng), &rng)
            case 1, 2: input = frameLikeBytes(maxLength: 300, &rng)  // valid headers, random bodies
            case 3: input = helloLikeBytes(&rng)
            default: input = noiseLikeBytes(maxLength: 300, &rng)
            }
            checker.checkFrameReader(input, &rng)
            checker.checkNoiseReader(input, &rng)
            checker.checkHello(input)
            if checker.failed { break }
        }
        // The generators reach deep: many frames and hellos decode, and most error kinds occur.
        // (The seed is fixed; the bounds are about 70 % of what it reaches: 8,844 frames with
        // the 24 frame types of protocol 4 and `block-delta`.)
        #expect(checker.decodedFrames > 6_000)
        #expect(checker.decodedHellos > 650)
        let expectedKinds: Set<String> = [
            "unknownFrameType", "frameTooLarge", "frameTooShort", "truncated", "trailingBytes",
            "invalidUTF8", "controlCharacter", "fieldTooLong", "fieldTooShort", "tooManyEntries",
            "invalidValue", "badMagic",
        ]
        #expect(checker.errorKinds.isSuperset(of: expectedKinds),
                "missing: \(expectedKinds.subtracting(checker.errorKinds).sorted())")
    }

    @Test func mutatedFrameStreams() {
        var rng = SplitMix64(seed: 0x5EED_0002)
        var checker = Checker()
        for _ in 0..<Self.mutationCount {
            let frames = randomFrames(Int.random(in: 1...4, using: &rng), maxBody: 80, using: &rng)
            let input = mutate(encodeAll(frames), &rng)
            checker.checkFrameReader(input, &rng)
            if checker.failed { break }
        }
        #expect(checker.frameErrors > 0 && checker.decodedFrames > 0)
    }

    @Test func mutatedNoiseStreams() throws {
        var rng = SplitMix64(seed: 0x5EED_0003)
        var checker = Checker()
        for _ in 0..<Self.mutationCount / 3 {
            var stream: [UInt8] = []
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                try NoiseFraming.append(randomBytes(Int.random(in: 0...80, using: &rng), &rng), to: &stream)
            }
            checker.checkNoiseReader(mutate(stream, &rng), &rng)
            if checker.failed { break }
        }
    }

    @Test func mutatedHellos() {
        var rng = SplitMix64(seed: 0x5EED_0004)
        var checker = Checker()
        let hellos = HelloTests.valid.map { $0.encode() }
        for _ in 0..<Self.mutationCount {
            checker.checkHello(mutate(hellos.randomElement(using: &rng)!, &rng))
            if checker.failed { break }
        }
        #expect(checker.helloErrors > 0 && checker.decodedHellos > 0)
    }

    /// Every prefix of a valid stream gives exactly the frames completed within it, and no error.
    @Test func truncationAtEveryLength() {
        var rng = SplitMix64(seed: 0x5EED_0005)
        for _ in 0..<40 {
            let frames = randomFrames(3, maxBody: 120, using: &rng)
            let stream = encodeAll(frames)
            let ends = frames.indices.map { encodeAll(Array(frames[...$0])).count }
            var reader = FrameReader()
            var decoded: [Frame] = []
            for (index, byte) in stream.enumerated() {
                reader.append(CollectionOfOne(byte))
                do {
                    while let frame = try reader.next() { decoded.append(frame) }
                } catch {
                    Issue.record("prefix of \(index + 1) bytes of a valid stream failed: \(error)")
                    return
                }
                if decoded.count != ends.count(where: { $0 <= index + 1 }) {
                    Issue.record("prefix of \(index + 1) bytes gave \(decoded.count) frames")
                    return
                }
            }
            #expect(decoded == frames)
        }
    }
}

// MARK: - Generators

func randomBytes(_ count: Int, _ rng: inout SplitMix64) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count + 8)
    while bytes.count < count {
        withUnsafeBytes(of: rng.next()) { bytes.append(contentsOf: $0) }
    }
    return Array(bytes.prefix(count))
}

/// Frames with valid type codes and body lengths near each type's range, random bodies.
private func frameLikeBytes(maxLength: Int, _ rng: inout SplitMix64) -> [UInt8] {
    var bytes: [UInt8] = []
    while bytes.count < maxLength && Int.random(in: 0..<4, using: &rng) != 0 {
        let type = FrameType.allCases.randomElement(using: &rng)!
        let range = WireLimits.bodyLengthRange(of: type)
        let length = Int.random(in: max(0, range.lowerBound - 1)...min(range.upperBound + 1, range.lowerBound + 40),
                                using: &rng)
        bytes += frameBytes(type.rawValue, length: length, body: [])
        var body = randomBytes(length, &rng)
        // Mostly make the inner length prefix agree with the body, so that text validation is reached.
        if Int.random(in: 0..<4, using: &rng) != 0 {
            switch type {
            case .close where length >= 4: body[2] = 0; body[3] = UInt8(length - 4)
            case .streamOpen where length >= 5: body[4] = UInt8(length - 5)
            case .message where length >= 12: body[8...11] = [0, 0, 0, UInt8(length - 12)]
            case .streamData where length >= 8: body[4...7] = [0, 0, 0, UInt8(length - 8)]
            case .pairing where length == 1: body[0] %= 7
            case .chunk where length >= 24: body[20...23] = [0, 0, 0, UInt8(length - 24)]
            case .hashedChunk where length >= 56: body[52...55] = [0, 0, 0, UInt8(length - 56)]
            case .accept where length >= 20: body[16...19] = [0, 0, 0, UInt8(length - 20)]
            case .decline where length >= 18, .cancel where length >= 18: body[16] = 0; body[17] = UInt8(length - 18)
            case .done where length >= 19: body[16] %= 2; body[17] = 0; body[18] = UInt8(length - 19)
            case .chunkAck where length == 21: body[20] %= 2
            case .shareOffer where length >= 3: body[0] = 1; body[2] = UInt8(length - 3)
            case .shareAnswer where length >= 5: body[0] = 1; body[2] %= 2; body[3] = 0; body[4] = UInt8(length - 5)
            case .indexAck where length >= 10: body[0] = UInt8(length - 9)
            case .blockResponse where length >= 9: body[4] %= 2; body[5...8] = [0, 0, 0, UInt8(length - 9)]
            case .blockDeltaRequest where length >= 55 && (length - 55) % 8 == 0:
                // Folder "f", path "p", a size within the limit, and as many sums as follow.
                body[4...8] = [1, 0x66, 0, 1, 0x70]
                body[17] = 0
                body[53...54] = [0, UInt8((length - 55) / 8)]
            default: break
            }
            if Bool.random(using: &rng) {  // and mostly ASCII
                for index in body.indices.dropFirst(type == .message ? 12 : 5) { body[index] &= 0x7F }
            }
        }
        bytes += body
    }
    return Array(bytes.prefix(maxLength))
}

/// Hellos with random field lengths and mostly printable ASCII content.
private func helloLikeBytes(_ rng: inout SplitMix64) -> [UInt8] {
    func text(_ maxCount: Int, _ rng: inout SplitMix64) -> [UInt8] {
        randomBytes(Int.random(in: 0...maxCount, using: &rng), &rng).map { byte in
            Int.random(in: 0..<20, using: &rng) == 0 ? byte : 0x20 + byte % 0x5F
        }
    }
    let features = (0..<Int.random(in: 0...3, using: &rng)).map { _ in text(34, &rng) }
    let contextFlag = Int.random(in: 0..<8, using: &rng) == 0 ? 2 : Int.random(in: 0...1, using: &rng)
    // Sometimes announce more features than are present (or allowed).
    let featureCount = Int.random(in: 0..<10, using: &rng) == 0 ? Int.random(in: 0...255, using: &rng) : nil
    let portFlag = Int.random(in: 0..<8, using: &rng) == 0 ? 2 : Int.random(in: 0...1, using: &rng)
    return helloBytes(name: text(64, &rng), software: text(66, &rng), features: features,
                      featureCount: featureCount, contextFlag: contextFlag, context: text(100, &rng),
                      portFlag: portFlag, port: Int.random(in: 0...65_535, using: &rng))
}

/// Short Noise messages with plausible length prefixes.
private func noiseLikeBytes(maxLength: Int, _ rng: inout SplitMix64) -> [UInt8] {
    var bytes: [UInt8] = []
    while bytes.count < maxLength {
        let length = Int.random(in: 0...60, using: &rng)
        bytes += [0, UInt8(length)] + randomBytes(length, &rng)
    }
    return Array(bytes.prefix(Int.random(in: 0...maxLength, using: &rng)))
}

/// One to three random edits: bit flips, byte changes, insertions, deletions, truncation.
func mutate(_ input: [UInt8], _ rng: inout SplitMix64) -> [UInt8] {
    var bytes = input
    for _ in 0..<Int.random(in: 1...3, using: &rng) {
        let position = Int.random(in: 0...bytes.count, using: &rng)
        switch Int.random(in: 0..<6, using: &rng) {
        case 0 where position < bytes.count:
            bytes[position] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
        case 1 where position < bytes.count:
            bytes[position] = UInt8.random(in: 0 ... .max, using: &rng)
        case 2:
            bytes.insert(contentsOf: randomBytes(Int.random(in: 1...4, using: &rng), &rng), at: position)
        case 3 where position < bytes.count:
            bytes.removeSubrange(position..<min(bytes.count, position + Int.random(in: 1...4, using: &rng)))
        case 4:
            bytes.removeSubrange(position...)
        default:
            bytes += randomBytes(Int.random(in: 1...8, using: &rng), &rng)
        }
    }
    return bytes
}

// MARK: - Properties

struct Checker {
    var issues = 0
    var decodedFrames = 0
    var frameErrors = 0
    var decodedHellos = 0
    var helloErrors = 0
    /// Names of the error cases seen (to show which checks the generators reach).
    var errorKinds: Set<String> = []

    mutating func noteError(_ error: WireError) {
        let kind = switch error {
        case .messageTooLarge: "messageTooLarge"
        case .unknownFrameType: "unknownFrameType"
        case .frameTooLarge: "frameTooLarge"
        case .frameTooShort: "frameTooShort"
        case .truncated: "truncated"
        case .trailingBytes: "trailingBytes"
        case .invalidUTF8: "invalidUTF8"
        case .controlCharacter: "controlCharacter"
        case .fieldTooLong: "fieldTooLong"
        case .fieldTooShort: "fieldTooShort"
        case .tooManyEntries: "tooManyEntries"
        case .invalidValue: "invalidValue"
        case .badMagic: "badMagic"
        case .helloTooLarge: "helloTooLarge"
        }
        errorKinds.insert(kind)
    }

    var failed: Bool { issues >= 5 }

    mutating func fail(_ message: String, _ input: [UInt8]) {
        issues += 1
        Issue.record("\(message); input: \(input)")
    }

    /// Whole vs split feeding agree; every frame is within the limits of ``WireLimits``; the
    /// frames re-encode to exactly the bytes they came from; the re-encoding decodes to the
    /// same frames. Returns the frames decoded.
    @discardableResult
    mutating func checkFrameReader(_ input: [UInt8], _ rng: inout SplitMix64) -> [Frame] {
        let whole = decodeFrames(input, cuts: [])
        let split = decodeFrames(input, cuts: [Int.random(in: 0...input.count, using: &rng)])
        if whole.frames != split.frames || whole.error != split.error {
            fail("split feeding changed the result", input)
            return []
        }
        if whole.frames.count > input.count / WireLimits.frameHeaderSize {
            fail("more frames than headers fit", input)
            return []
        }
        for frame in whole.frames {
            if let violation = limitViolation(frame) {
                fail("\(frame) breaks a limit: \(violation)", input)
                return []
            }
        }
        decodedFrames += whole.frames.count
        if let error = whole.error {
            frameErrors += 1
            noteError(error)
        }
        // Index entries decode into the file model (PeerModel), which keeps one form of what a
        // hostile sender may vary (version order, a device twice, zero counters, a link target
        // on a non-link or a tombstone, a root hash on a tombstone, sizes past Int64.max): such
        // frames re-encode in that form, which must decode to the same frames (checked below).
        let reencoded = encodeAll(whole.frames)
        let normalized = whole.frames.contains { if case .indexUpdate = $0 { true } else { false } }
        if !normalized && !input.starts(with: reencoded) {
            fail("re-encoding differs from the decoded bytes", input)
            return []
        }
        for frame in whole.frames {
            if (try? Frame(decoding: FrameEncoder.encode(frame))) != frame {
                fail("\(frame) does not survive re-encoding", input)
                return []
            }
        }
        return whole.frames
    }

    /// Messages re-frame to exactly the consumed bytes; the rest is an incomplete message. A reader
    /// with a small limit fails with a typed error or agrees with the default reader.
    mutating func checkNoiseReader(_ input: [UInt8], _ rng: inout SplitMix64) {
        var reader = NoiseMessageReader()
        var small = NoiseMessageReader(maxMessageLength: 40)
        let cut = Int.random(in: 0...input.count, using: &rng)
        var messages: [[UInt8]] = []
        var smallMessages: [[UInt8]] = []
        var smallFailed = false
        for piece in [input[..<cut], input[cut...]] {
            reader.append(piece)
            small.append(piece)
            do {
                while let message = try reader.next() { messages.append(message) }
            } catch {
                return fail("default Noise reader failed: \(error)", input)
            }
            do {
                while let message = try small.next() { smallMessages.append(message) }
            } catch {
                smallFailed = true
            }
        }
        var reframed: [UInt8] = []
        for message in messages { try? NoiseFraming.append(message, to: &reframed) }
        if !input.starts(with: reframed) || reframed.count + reader.bufferedByteCount != input.count {
            return fail("Noise messages do not re-frame to the input", input)
        }
        let rest = input[reframed.count...]
        if rest.count >= 2, rest.count >= 2 + (Int(rest[rest.startIndex]) << 8 | Int(rest[rest.startIndex + 1])) {
            return fail("a complete Noise message was left in the buffer", input)
        }
        if !messages.starts(with: smallMessages) || (!smallFailed && smallMessages != messages) {
            return fail("the limited Noise reader disagrees", input)
        }
    }

    /// A decoded hello re-encodes to exactly its input.
    mutating func checkHello(_ input: [UInt8]) {
        do {
            let hello = try Hello.decode(input)
            decodedHellos += 1
            if hello.encode() != input { fail("hello re-encodes differently", input) }
        } catch {
            helloErrors += 1
            noteError(error)
        }
    }
}
