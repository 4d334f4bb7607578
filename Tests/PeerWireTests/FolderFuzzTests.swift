import PeerModel
import PeerWire
import Testing
import TestKit

/// The shared-folder frames (share offer and answer, index update and ack, block request and
/// response) under the same fuzzing as the other frames: garbage with their type codes,
/// mutations of valid encodings, every truncation. These frames come from any member of a
/// folder, so the decoder must hold against a hostile one: typed errors only, and every value
/// it returns within the limits ``WireLimits`` names (checked here independently of the
/// module's own validation, see ``limitViolation(_:)``).
@Suite struct FolderFuzzTests {
    static let mutationCount = 20_000

    @Test func mutatedFolderFrames() {
        var rng = SplitMix64(seed: 0x5EED_0F01)
        var checker = Checker()
        var decodedFolderFrames = 0
        for _ in 0..<Self.mutationCount {
            let frames = (0..<Int.random(in: 1...3, using: &rng)).map { _ in randomFolderFrame(using: &rng) }
            let input = mutate(encodeAll(frames), &rng)
            decodedFolderFrames += checker.checkFrameReader(input, &rng).count { isFolderFrame($0) }
            if checker.failed { break }
        }
        // Mutations mostly break the frames, but many survive in some form (a changed byte in
        // a hash, a counter, a text) and must then respect every limit.
        #expect(decodedFolderFrames > 5_000, "\(decodedFolderFrames)")
        #expect(checker.errorKinds.isSuperset(of: ["truncated", "trailingBytes", "invalidValue", "frameTooShort"]),
                "\(checker.errorKinds.sorted())")
    }

    /// Headers of folder frame types with in-range lengths, then bodies that start like the
    /// real thing (a valid folder ID, plausible counts and length prefixes) and go on at random.
    @Test func garbageFolderFrames() {
        var rng = SplitMix64(seed: 0x5EED_0F02)
        var checker = Checker()
        for _ in 0..<Self.mutationCount {
            checker.checkFrameReader(folderLikeBytes(&rng), &rng)
            if checker.failed { break }
        }
        #expect(checker.decodedFrames > 500, "\(checker.decodedFrames)")
        #expect(checker.errorKinds.isSuperset(of: ["truncated", "invalidUTF8", "controlCharacter", "fieldTooLong",
                                                   "fieldTooShort", "tooManyEntries", "invalidValue", "trailingBytes"]),
                "\(checker.errorKinds.sorted())")
    }

    /// Cut short anywhere, a folder frame is either still incomplete (the header announces
    /// more) or, with its header patched to the shorter length, a typed error: never a frame
    /// that was not sent, never a crash.
    @Test func truncatedFolderFrames() {
        var rng = SplitMix64(seed: 0x5EED_0F03)
        for _ in 0..<60 {
            let frame = randomFolderFrame(using: &rng)
            let bytes = FrameEncoder.encode(frame)
            // Every length of a short frame; for a long one (a 4 KiB path) its first and last
            // 100 lengths and 200 between.
            let lengths = bytes.count <= 400 ? Array(0..<bytes.count)
                : Array(0..<100) + Array(bytes.count - 100..<bytes.count) + (0..<200).map { _ in Int.random(in: 100..<bytes.count - 100, using: &rng) }
            for length in lengths {
                let prefix = Array(bytes[..<length])
                let asIs = decodeFrames(prefix, cuts: [])
                if !asIs.frames.isEmpty || asIs.error != nil {
                    Issue.record("\(length) of \(bytes.count) bytes of \(frame): \(asIs)")
                    return
                }
                guard length >= WireLimits.frameHeaderSize else { continue }
                var patched = prefix
                let body = length - WireLimits.frameHeaderSize
                patched[1...4] = [UInt8(body >> 24 & 0xFF), UInt8(body >> 16 & 0xFF), UInt8(body >> 8 & 0xFF), UInt8(body & 0xFF)]
                let shortened = decodeFrames(patched, cuts: [])
                if shortened.error == nil, shortened.frames.count == 1, let decoded = shortened.frames.first,
                   let violation = limitViolation(decoded) {
                    Issue.record("a shortened \(frame) decoded to \(decoded), which breaks a limit: \(violation)")
                    return
                }
                if shortened.frames.count > 1 || (shortened.frames.isEmpty && shortened.error == nil) {
                    Issue.record("a shortened \(frame) gave \(shortened)")
                    return
                }
            }
        }
    }

    /// The independent limit check flags a value just over each limit (frames built directly,
    /// as a decoder that forgot a check would return them).
    @Test func theLimitCheckSeesEveryOverflow() {
        let folder = String(repeating: "f", count: WireLimits.maxFolderID + 1)
        let hash = Array(repeating: UInt8(1), count: 32)
        var longPath = entry(path: "a", devices: 1)
        longPath.path = String(repeating: "p", count: WireLimits.maxEntryPath + 1)
        var manyDevices = entry(path: "a", devices: WireLimits.maxVersionEntries + 1)
        var badMode = entry(path: "a", devices: 1)
        badMode.mode = 0o10000
        var shortHash = entry(path: "a", devices: 1)
        shortHash.rootHash = [1]
        var control = entry(path: "a\u{1B}[2J", devices: 1)
        let over: [Frame] = [
            .shareOffer(folder: folder, label: ""),
            .shareOffer(folder: "f", label: String(repeating: "l", count: WireLimits.maxOfferName + 1)),
            .shareAnswer(folder: "f", accepted: false, reason: String(repeating: "r", count: WireLimits.maxCloseReason + 1)),
            .indexAck(folder: "", sequence: 0),
            .blockRequest(request: 0, folder: "f", path: "p", offset: 0, size: UInt32(WireLimits.maxChunk + 1), hash: hash),
            .blockRequest(request: 0, folder: "f", path: "p", offset: 0, size: 1, hash: [1]),
            .blockDeltaRequest(request: 0, folder: "f", path: "p", offset: 0, size: 1, hash: hash, sums: [1, 2, 3]),
            .blockDeltaRequest(request: 0, folder: "f", path: "p", offset: 0, size: 1, hash: hash,
                               sums: Array(repeating: 0, count: (WireLimits.maxDeltaSums + 1) * 8)),
            .blockDeltaRequest(request: 0, folder: "f", path: "", offset: 0, size: 1, hash: hash, sums: []),
            .blockResponse(request: 0, ok: true, data: Array(repeating: 0, count: WireLimits.maxChunk + 1)),
            .indexUpdate(folder: "f", full: true, entries: [longPath]),
            .indexUpdate(folder: "f", full: true, entries: [manyDevices]),
            .indexUpdate(folder: "f", full: true, entries: [badMode]),
            .indexUpdate(folder: "f", full: true, entries: [shortHash]),
            .indexUpdate(folder: "f", full: true, entries: [control]),
            .indexUpdate(folder: "f", full: true, entries: Array(repeating: entry(path: "a", devices: 0), count: WireLimits.maxIndexEntries + 1)),
            .indexBlocks(folder: "f", blocks: [[]]),
            .indexBlocks(folder: "f", blocks: [Array(repeating: 1, count: WireLimits.maxIndexBlock + 1)]),
            .indexBlocks(folder: "", blocks: [[1]]),
            .indexBlocks(folder: "f", blocks: Array(repeating: [1], count: WireLimits.maxIndexEntries + 1)),
        ]
        for frame in over { #expect(limitViolation(frame) != nil, "\(frame)") }
        manyDevices = entry(path: "a", devices: WireLimits.maxVersionEntries)
        control.path = "a"
        #expect(limitViolation(.indexUpdate(folder: "f", full: true, entries: [manyDevices, control])) == nil)
    }

    /// Frames at the limits decode; one byte, entry or device over a limit is a typed error.
    @Test func limitsAreExactForFolderFrames() throws {
        let folder = String(repeating: "f", count: WireLimits.maxFolderID)
        let label = String(repeating: "é", count: WireLimits.maxOfferName / 2)  // 254 bytes, multibyte
        let atLimit: [Frame] = [
            .shareOffer(folder: folder, label: label),
            .shareAnswer(folder: folder, accepted: false, reason: String(repeating: "r", count: WireLimits.maxCloseReason)),
            .indexAck(folder: folder, sequence: .max),
            .blockRequest(request: .max, folder: folder, path: String(repeating: "p", count: WireLimits.maxEntryPath),
                          offset: .max, size: UInt32(WireLimits.maxChunk), hash: Array(repeating: 1, count: 32)),
            .blockDeltaRequest(request: .max, folder: folder, path: String(repeating: "p", count: WireLimits.maxEntryPath),
                               offset: .max, size: UInt32(WireLimits.maxChunk), hash: Array(repeating: 1, count: 32),
                               sums: Array(repeating: 7, count: WireLimits.maxDeltaSums * 8)),
            .indexUpdate(folder: folder, full: true, entries: [entry(path: String(repeating: "q", count: WireLimits.maxEntryPath),
                                                                     devices: WireLimits.maxVersionEntries)]),
            .indexBlocks(folder: folder, blocks: [Array(repeating: 9, count: WireLimits.maxIndexBlock), [1]]),
            .indexBlocks(folder: folder, blocks: Array(repeating: [2], count: WireLimits.maxIndexEntries)),
            .indexBlocks(folder: folder, blocks: []),
            .folderSelection(folder: folder, paths: Array(repeating: String(repeating: "s", count: WireLimits.maxEntryPath),
                                                          count: WireLimits.maxSelectionPaths)),
        ]
        for frame in atLimit {
            #expect(try Frame(decoding: FrameEncoder.encode(frame)) == frame)
            #expect(limitViolation(frame) == nil)
        }
        // Over the limits, written by hand (the encoder refuses such frames).
        var longFolder = Bytes()
        longFolder.u8(WireLimits.maxFolderID + 1)
        longFolder.text(folder + "x")
        longFolder.u8(0)
        #expect(throws: WireError.self) { try Frame(decoding: frameBytes(FrameType.shareOffer.rawValue, body: longFolder.bytes)) }

        var bigSize = Bytes()
        bigSize.u32(1)
        bigSize.u8(1); bigSize.text("f")
        bigSize.u16(1); bigSize.text("p")
        bigSize.raw(Array(repeating: 0, count: 8))
        bigSize.u32(WireLimits.maxChunk + 1)
        bigSize.raw(Array(repeating: 0, count: 32))
        #expect(throws: WireError.invalidValue(field: "block size", value: UInt64(WireLimits.maxChunk + 1))) {
            try Frame(decoding: frameBytes(FrameType.blockRequest.rawValue, body: bigSize.bytes))
        }
        // A delta request's sum count is checked before the sums are read, and must match them.
        var manySums = Bytes()
        manySums.u32(1)
        manySums.u8(1); manySums.text("f")
        manySums.u16(1); manySums.text("p")
        manySums.raw(Array(repeating: 0, count: 8))
        manySums.u32(65_536)
        manySums.raw(Array(repeating: 0, count: 32))
        var fewerSums = manySums
        manySums.u16(WireLimits.maxDeltaSums + 1)
        manySums.raw(Array(repeating: 0, count: 16))
        #expect(throws: WireError.tooManyEntries(field: "block sums", count: WireLimits.maxDeltaSums + 1, limit: WireLimits.maxDeltaSums)) {
            try Frame(decoding: frameBytes(FrameType.blockDeltaRequest.rawValue, body: manySums.bytes))
        }
        fewerSums.u16(4)
        fewerSums.raw(Array(repeating: 0, count: 3 * 8))
        #expect(throws: WireError.self) { try Frame(decoding: frameBytes(FrameType.blockDeltaRequest.rawValue, body: fewerSums.bytes)) }
        fewerSums.raw(Array(repeating: 0, count: 8 + 1))
        #expect(throws: WireError.self) { try Frame(decoding: frameBytes(FrameType.blockDeltaRequest.rawValue, body: fewerSums.bytes)) }

        var tooMany = Bytes()
        tooMany.u8(1); tooMany.text("f")
        tooMany.u8(0)
        tooMany.u32(WireLimits.maxIndexEntries + 1)
        tooMany.raw(Array(repeating: 0, count: 64))
        #expect(throws: WireError.tooManyEntries(field: "index entries", count: WireLimits.maxIndexEntries + 1,
                                                 limit: WireLimits.maxIndexEntries)) {
            try Frame(decoding: frameBytes(FrameType.indexUpdate.rawValue, body: tooMany.bytes))
        }

        // An index block one byte over, or empty; a block count over the limit, or more than
        // the body holds, is refused before any block is read.
        for size in [WireLimits.maxIndexBlock + 1, 0] {
            var block = Bytes()
            block.u8(1); block.text("f")
            block.u16(1)
            block.u16(size)
            block.raw(Array(repeating: 5, count: size))
            #expect(throws: WireError.self) { try Frame(decoding: frameBytes(FrameType.indexBlocks.rawValue, body: block.bytes)) }
        }
        var manyBlocks = Bytes()
        manyBlocks.u8(1); manyBlocks.text("f")
        manyBlocks.u16(WireLimits.maxIndexEntries + 1)
        manyBlocks.raw(Array(repeating: 0, count: 64))
        #expect(throws: WireError.tooManyEntries(field: "index blocks", count: WireLimits.maxIndexEntries + 1,
                                                 limit: WireLimits.maxIndexEntries)) {
            try Frame(decoding: frameBytes(FrameType.indexBlocks.rawValue, body: manyBlocks.bytes))
        }
        // A selection: a path count over the limit, or more than the body holds, is refused
        // before any path is read; an empty path or one a byte too long is refused.
        var manyPaths = Bytes()
        manyPaths.u8(1); manyPaths.text("f")
        manyPaths.u16(WireLimits.maxSelectionPaths + 1)
        manyPaths.raw(Array(repeating: 0, count: 3 * (WireLimits.maxSelectionPaths + 1)))
        #expect(throws: WireError.tooManyEntries(field: "selected paths", count: WireLimits.maxSelectionPaths + 1,
                                                 limit: WireLimits.maxSelectionPaths)) {
            try Frame(decoding: frameBytes(FrameType.folderSelection.rawValue, body: manyPaths.bytes))
        }
        var fewBytes = Bytes()
        fewBytes.u8(1); fewBytes.text("f")
        fewBytes.u16(500)
        fewBytes.raw(Array(repeating: 0, count: 30))
        #expect(throws: WireError.truncated(field: "selected paths")) {
            try Frame(decoding: frameBytes(FrameType.folderSelection.rawValue, body: fewBytes.bytes))
        }
        for size in [0, WireLimits.maxEntryPath + 1] {
            var path = Bytes()
            path.u8(1); path.text("f")
            path.u16(1)
            path.u16(size)
            path.raw(Array(repeating: 0x61, count: size))
            #expect(throws: WireError.self) { try Frame(decoding: frameBytes(FrameType.folderSelection.rawValue, body: path.bytes)) }
        }
        #expect(throws: WireError.self) {
            try Frame.folderSelection(folder: "f", paths: Array(repeating: "a", count: WireLimits.maxSelectionPaths + 1)).validate()
        }
        var unheld = Bytes()
        unheld.u8(1); unheld.text("f")
        unheld.u16(100)
        unheld.raw(Array(repeating: 0, count: 30))
        #expect(throws: WireError.truncated(field: "index blocks")) {
            try Frame(decoding: frameBytes(FrameType.indexBlocks.rawValue, body: unheld.bytes))
        }

        // One device too many in a version vector: the count is refused before any device is read.
        var encoded = FrameEncoder.encode(.indexUpdate(folder: "f", full: false, entries: [entry(path: "a", devices: 1)]))
        let countOffset = WireLimits.frameHeaderSize + 2 + 1 + 4 + (2 + 1) + 1 + 8 + 8 + 4 + 1 + 2
        #expect(encoded[countOffset...countOffset + 1] == [0, 1])
        encoded[countOffset] = UInt8((WireLimits.maxVersionEntries + 1) >> 8)
        encoded[countOffset + 1] = UInt8((WireLimits.maxVersionEntries + 1) & 0xFF)
        #expect(throws: WireError.tooManyEntries(field: "version vector", count: WireLimits.maxVersionEntries + 1,
                                                 limit: WireLimits.maxVersionEntries)) {
            try Frame(decoding: encoded)
        }
    }
}

// MARK: - Generators

private func isFolderFrame(_ frame: Frame) -> Bool {
    switch frame.type {
    case .shareOffer, .shareAnswer, .indexUpdate, .indexAck, .blockRequest, .blockResponse, .blockDeltaRequest, .indexBlocks: true
    default: false
    }
}

/// Text of `count` characters mixing ASCII, two-, three- and four-byte characters, cut to at
/// most `maxBytes` UTF-8 bytes on a character boundary.
private func randomText(count: Int, maxBytes: Int, using rng: inout SplitMix64) -> String {
    let alphabet: [Character] = ["a", "b", "z", "0", "/", ".", "-", " ", "é", "ß", "ж", "中", "文", "📦", "😀"]
    var text = ""
    for _ in 0..<count {
        let next = alphabet.randomElement(using: &rng)!
        if text.utf8.count + String(next).utf8.count > maxBytes { break }
        text.append(next)
    }
    return text
}

/// A length drawn mostly small, sometimes at or near the limit (where off-by-ones live).
private func length(_ range: ClosedRange<Int>, using rng: inout SplitMix64) -> Int {
    switch Int.random(in: 0..<8, using: &rng) {
    case 0: range.upperBound
    case 1: range.lowerBound
    case 2: Int.random(in: range, using: &rng)
    default: Int.random(in: range.lowerBound...min(range.upperBound, range.lowerBound + 12), using: &rng)
    }
}

private func folderID(using rng: inout SplitMix64) -> String {
    String(repeating: "x", count: length(1...WireLimits.maxFolderID, using: &rng))
}

private func entry(path: String, devices: Int) -> SyncFileEntry {
    SyncFileEntry(FileEntry(path: path, kind: .file, size: 1, mtimeNs: 0, mode: 0o644,
                            version: VersionVector(Dictionary(uniqueKeysWithValues: (0..<devices).map { ("D\($0)", UInt64($0) + 1) })),
                            rootHash: Array(repeating: 3, count: 32), modifiedBy: "D0", sequence: 1),
                  manifest: [1, 2, 3])
}

private func randomEntry(using rng: inout SplitMix64) -> SyncFileEntry {
    let kind = FileKind.allCases.randomElement(using: &rng)!
    let deleted = Int.random(in: 0..<4, using: &rng) == 0
    let hasContent = kind == .file && !deleted
    let pathLength = Int.random(in: 0..<20, using: &rng) == 0 ? WireLimits.maxEntryPath : Int.random(in: 1...40, using: &rng)
    let path = Int.random(in: 0..<3, using: &rng) == 0
        ? randomText(count: pathLength, maxBytes: pathLength, using: &rng).ifEmpty("p")
        : String(repeating: "d/", count: (pathLength - 1) / 2) + "f"
    let devices = Int.random(in: 0..<30, using: &rng) == 0 ? WireLimits.maxVersionEntries : Int.random(in: 0...3, using: &rng)
    var version: [String: UInt64] = [:]
    for _ in 0..<devices { version[String(repeating: "K", count: length(1...64, using: &rng))] = rng.next() | 1 }
    return SyncFileEntry(FileEntry(
        path: path, kind: kind, size: hasContent ? Int64(rng.next() >> Int.random(in: 1...63, using: &rng)) : 0,
        mtimeNs: Int64(bitPattern: rng.next()), mode: UInt32.random(in: 0...0o7777, using: &rng), deleted: deleted,
        symlinkTarget: kind == .symlink && !deleted ? randomText(count: Int.random(in: 0...30, using: &rng), maxBytes: WireLimits.maxEntryPath, using: &rng) : nil,
        version: VersionVector(version), rootHash: hasContent ? rng.bytes(32) : nil,
        modifiedBy: String(repeating: "M", count: length(1...64, using: &rng)), sequence: Int64(rng.next() >> 1)),
        manifest: hasContent ? rng.bytes(Int.random(in: 0...60, using: &rng)) : [])
}

/// A valid shared-folder frame with random fields, sometimes at their limits.
func randomFolderFrame(using rng: inout SplitMix64) -> Frame {
    switch Int.random(in: 0..<8, using: &rng) {
    case 7:
        let count = Int.random(in: 0..<10, using: &rng) == 0 ? 0 : Int.random(in: 1...4, using: &rng)
        return .indexBlocks(folder: folderID(using: &rng),
                            blocks: (0..<count).map { _ in rng.bytes(length(1...WireLimits.maxIndexBlock, using: &rng)) })
    case 0:
        return .shareOffer(folder: folderID(using: &rng),
                           label: randomText(count: length(0...WireLimits.maxOfferName, using: &rng), maxBytes: WireLimits.maxOfferName, using: &rng))
    case 1:
        return .shareAnswer(folder: folderID(using: &rng), accepted: Bool.random(using: &rng),
                            reason: randomText(count: length(0...80, using: &rng), maxBytes: WireLimits.maxCloseReason, using: &rng))
    case 2:
        let count = Int.random(in: 0..<10, using: &rng) == 0 ? 0 : Int.random(in: 1...4, using: &rng)
        return .indexUpdate(folder: folderID(using: &rng), full: Bool.random(using: &rng),
                            entries: (0..<count).map { _ in randomEntry(using: &rng) })
    case 3:
        return .indexAck(folder: folderID(using: &rng), sequence: rng.next())
    case 4:
        let pathLength = length(1...WireLimits.maxEntryPath, using: &rng)
        return .blockRequest(request: UInt32.random(in: 0 ... .max, using: &rng), folder: folderID(using: &rng),
                             path: String(repeating: "b", count: pathLength), offset: rng.next(),
                             size: UInt32.random(in: 0...UInt32(WireLimits.maxChunk), using: &rng), hash: rng.bytes(32))
    case 5:
        let sums = Int.random(in: 0..<8, using: &rng) == 0 ? WireLimits.maxDeltaSums : Int.random(in: 0...64, using: &rng)
        return .blockDeltaRequest(request: UInt32.random(in: 0 ... .max, using: &rng), folder: folderID(using: &rng),
                                  path: String(repeating: "d", count: length(1...WireLimits.maxEntryPath, using: &rng)), offset: rng.next(),
                                  size: UInt32.random(in: 0...UInt32(WireLimits.maxChunk), using: &rng), hash: rng.bytes(32),
                                  sums: rng.bytes(sums * WireLimits.deltaSumSize))
    default:
        let ok = Bool.random(using: &rng)
        return .blockResponse(request: UInt32.random(in: 0 ... .max, using: &rng), ok: ok,
                              data: ok ? rng.bytes(Int.random(in: 0...100, using: &rng)) : [])
    }
}

/// One folder frame whose body starts plausibly and continues at random: a valid or nearly
/// valid folder ID, then for index updates an entry count and entry fields with length
/// prefixes that mostly agree with what follows.
private func folderLikeBytes(_ rng: inout SplitMix64) -> [UInt8] {
    let types: [FrameType] = [.shareOffer, .shareAnswer, .indexUpdate, .indexAck, .blockRequest, .blockResponse, .blockDeltaRequest,
                              .indexBlocks]
    let type = types.randomElement(using: &rng)!
    var body = Bytes()
    func text(_ maxBytes: Int, _ prefix: Int) {
        let count = Int.random(in: 0...maxBytes + 1, using: &rng)
        let bytes = rng.bytes(count).map { Int.random(in: 0..<6, using: &rng) == 0 ? $0 : 0x20 + $0 % 0x5F }
        switch prefix {
        case 1: body.u8(count & 0xFF)
        case 2: body.u16(count)
        default: body.u32(count)
        }
        body.raw(bytes)
    }
    text(Int.random(in: 0..<4, using: &rng) == 0 ? 70 : 8, 1)  // folder ID
    switch type {
    case .indexUpdate:
        body.u8(Int.random(in: 0...2, using: &rng))
        let count = Int.random(in: 0..<12, using: &rng) == 0 ? Int.random(in: 0...20_000, using: &rng) : Int.random(in: 0...3, using: &rng)
        body.u32(count)
        for _ in 0..<min(count, 3) {
            text(12, 2)                                                // path
            body.u8(Int.random(in: 0...3, using: &rng))                // kind
            body.raw(rng.bytes(16))                                    // size, mtime
            body.u32(Int.random(in: 0..<8, using: &rng) == 0 ? 0o10000 : 0o644)
            body.u8(Int.random(in: 0...2, using: &rng))                // deleted
            text(6, 2)                                                 // symlink target
            let devices = Int.random(in: 0..<8, using: &rng) == 0 ? 257 : Int.random(in: 0...2, using: &rng)
            body.u16(devices)
            for _ in 0..<min(devices, 2) { text(66, 1); body.raw(rng.bytes(8)) }
            body.raw(rng.bytes(8))                                     // sequence
            text(66, 1)                                                // modified by
            body.u8([0, 32, 31, 33].randomElement(using: &rng)!)       // root hash length
            body.raw(rng.bytes(Int.random(in: 0...33, using: &rng)))
            body.u32(Int.random(in: 0..<10, using: &rng) == 0 ? WireLimits.maxManifest + 1 : Int.random(in: 0...4, using: &rng))
            body.raw(rng.bytes(Int.random(in: 0...4, using: &rng)))
        }
    case .blockRequest, .blockDeltaRequest:
        var request = Bytes()
        request.raw(rng.bytes(4))
        request.raw(body.bytes)
        body = request
        text(20, 2)
        body.raw(rng.bytes(8))
        body.u32(Int.random(in: 0..<6, using: &rng) == 0 ? WireLimits.maxChunk + 1 : Int.random(in: 0...65_536, using: &rng))
        body.raw(rng.bytes(Int.random(in: 30...34, using: &rng)))
        if type == .blockDeltaRequest {
            let count = Int.random(in: 0..<6, using: &rng) == 0 ? WireLimits.maxDeltaSums + 1 : Int.random(in: 0...6, using: &rng)
            body.u16(count)
            body.raw(rng.bytes(max(0, count * 8 + Int.random(in: -2...2, using: &rng))))
        }
    case .shareAnswer:
        body.u8(Int.random(in: 0...2, using: &rng))
        text(20, 2)
    case .shareOffer:
        text(Int.random(in: 0..<4, using: &rng) == 0 ? 260 : 20, 1)
    case .indexAck:
        body.raw(rng.bytes(Int.random(in: 7...9, using: &rng)))
    case .indexBlocks:
        let count = Int.random(in: 0..<12, using: &rng) == 0 ? Int.random(in: 0...65_535, using: &rng) : Int.random(in: 0...3, using: &rng)
        body.u16(count)
        for _ in 0..<min(count, 3) {
            let size = [0, 1, 7, WireLimits.maxIndexBlock, WireLimits.maxIndexBlock + 1].randomElement(using: &rng)!
            body.u16(size)
            body.raw(rng.bytes(max(0, min(size, 64) + Int.random(in: -2...2, using: &rng))))
        }
    default:  // blockResponse: the folder ID above stands in for the request ID and flag
        body.u32(Int.random(in: 0...8, using: &rng))
        body.raw(rng.bytes(Int.random(in: 0...8, using: &rng)))
    }
    let range = WireLimits.bodyLengthRange(of: type)
    let announced = Int.random(in: 0..<10, using: &rng) == 0 ? range.upperBound + 1 : max(range.lowerBound, body.bytes.count)
    return frameBytes(type.rawValue, length: announced, body: body.bytes)
}

private extension String {
    func ifEmpty(_ replacement: String) -> String { isEmpty ? replacement : self }
}

// MARK: - Limits

/// Why a decoded frame breaks a limit of ``WireLimits`` or a text rule, or nil. Written out
/// here rather than calling ``Frame/validate()``, so that a limit the decoder and the
/// validation both forget is still caught.
func limitViolation(_ frame: Frame) -> String? {
    func text(_ value: String, _ name: String, min: Int = 0, max: Int) -> String? {
        let bytes = value.utf8.count
        if bytes < min || bytes > max { return "\(name) has \(bytes) bytes (allowed \(min)...\(max))" }
        if value.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) {
            return "\(name) holds a control character"
        }
        return nil
    }
    switch frame {
    case let .shareOffer(folder, label):
        return text(folder, "folder id", min: 1, max: WireLimits.maxFolderID) ?? text(label, "label", max: WireLimits.maxOfferName)
    case let .shareAnswer(folder, _, reason):
        return text(folder, "folder id", min: 1, max: WireLimits.maxFolderID) ?? text(reason, "reason", max: WireLimits.maxCloseReason)
    case let .indexAck(folder, _):
        return text(folder, "folder id", min: 1, max: WireLimits.maxFolderID)
    case let .blockDeltaRequest(request, folder, path, offset, size, hash, sums):
        if sums.count % 8 != 0 || sums.count > WireLimits.maxDeltaSums * 8 { return "\(sums.count) bytes of block sums" }
        return limitViolation(.blockRequest(request: request, folder: folder, path: path, offset: offset, size: size, hash: hash))
    case let .blockRequest(_, folder, path, _, size, hash):
        if hash.count != 32 { return "block hash of \(hash.count) bytes" }
        if size > WireLimits.maxChunk { return "block size \(size)" }
        return text(folder, "folder id", min: 1, max: WireLimits.maxFolderID) ?? text(path, "block path", min: 1, max: WireLimits.maxEntryPath)
    case let .blockResponse(_, _, data):
        return data.count > WireLimits.maxChunk ? "block data of \(data.count) bytes" : nil
    case let .indexBlocks(folder, blocks):
        if let problem = text(folder, "folder id", min: 1, max: WireLimits.maxFolderID) { return problem }
        if blocks.count > WireLimits.maxIndexEntries { return "\(blocks.count) index blocks" }
        if let block = blocks.first(where: { $0.isEmpty || $0.count > WireLimits.maxIndexBlock }) { return "index block of \(block.count) bytes" }
        return nil
    case let .indexUpdate(folder, _, entries):
        if let problem = text(folder, "folder id", min: 1, max: WireLimits.maxFolderID) { return problem }
        if entries.count > WireLimits.maxIndexEntries { return "\(entries.count) index entries" }
        for entry in entries {
            if let problem = text(entry.path, "path", min: 1, max: WireLimits.maxEntryPath)
                ?? text(entry.symlinkTarget ?? "", "symlink target", max: WireLimits.maxEntryPath)
                ?? text(entry.modifiedBy, "modified by", min: 1, max: 64) {
                return problem
            }
            if entry.mode > 0o7777 { return "mode \(String(entry.mode, radix: 8))" }
            if entry.version.count > WireLimits.maxVersionEntries { return "\(entry.version.count) version entries" }
            if let problem = entry.version.counters.keys.lazy.compactMap({ text($0, "version device", min: 1, max: 64) }).first {
                return problem
            }
            if let hash = entry.rootHash, !hash.isEmpty, hash.count != 32 { return "root hash of \(hash.count) bytes" }
            if entry.manifest.count > WireLimits.maxManifest { return "manifest of \(entry.manifest.count) bytes" }
        }
        return nil
    default:
        return nil
    }
}
