import Glibc
import PeerCrypto
@testable import PeerFiles
import Testing

/// Parameter sets used throughout: tiny ones make many chunks from little data.
let smallParameters: [ChunkParameters] = [
    ChunkParameters(minSize: 1, averageSize: 16, maxSize: 16),
    ChunkParameters(minSize: 64, averageSize: 256, maxSize: 1_024),
    ChunkParameters(minSize: 1_024, averageSize: 4_096, maxSize: 16_384),
    ChunkParameters(minSize: 2_048, averageSize: 8_192, maxSize: 8_192 * 3),
]

@Suite struct ChunkerTests {
    @Test(arguments: [1, 2, 3] as [UInt64], smallParameters)
    func sameContentGivesSameBoundaries(seed: UInt64, parameters: ChunkParameters) {
        let a = pseudoRandomBytes(count: 300_000, seed: seed)
        let b = Array(a)   // a separate copy
        #expect(Chunker.boundaries(in: a, parameters: parameters) == Chunker.boundaries(in: b, parameters: parameters))
    }

    @Test(arguments: smallParameters + [ChunkParameters.forFileSize(1 << 20)])
    func boundariesRespectMinAndMax(parameters: ChunkParameters) {
        for seed in [7, 8] as [UInt64] {
            let data = pseudoRandomBytes(count: 1 << 20, seed: seed)
            let boundaries = Chunker.boundaries(in: data, parameters: parameters)
            #expect(boundaries.last == data.count)
            #expect(boundaries == boundaries.sorted())
            let sizes = ranges(boundaries).map(\.count)
            for size in sizes.dropLast() {
                #expect(size > parameters.minSize && size <= parameters.maxSize)
            }
            #expect(sizes.last! >= 1 && sizes.last! <= parameters.maxSize)
        }
    }

    /// On random data the mean chunk size lands near the target (normalized chunking).
    @Test(arguments: [ChunkParameters(minSize: 1_024, averageSize: 4_096, maxSize: 16_384),
                      ChunkParameters.forFileSize(8 << 20)])
    func averageIsNearTarget(parameters: ChunkParameters) {
        let data = pseudoRandomBytes(count: 8 << 20, seed: 99)
        let count = Chunker.boundaries(in: data, parameters: parameters).count
        let mean = Double(data.count) / Double(count)
        #expect(mean > Double(parameters.averageSize) * 0.75 && mean < Double(parameters.averageSize) * 1.5,
                "mean chunk \(mean) for \(parameters)")
    }

    /// The point of content-defined chunking: inserting a few bytes in the middle of a
    /// 64 MiB file changes only the chunks around the insertion.
    @Test(arguments: [(seed: 1, insert: 1), (seed: 2, insert: 5), (seed: 3, insert: 17), (seed: 4, insert: 4_096)] as [(seed: UInt64, insert: Int)])
    func insertionChangesOnlyNearbyChunks(seed: UInt64, insert: Int) {
        let size = 64 << 20
        let parameters = ChunkParameters.forFileSize(UInt64(size))
        let original = pseudoRandomBytes(count: size, seed: seed)
        let at = size / 2 + Int(seed) * 12_345
        var modified = original
        modified.insert(contentsOf: pseudoRandomBytes(count: insert, seed: seed + 1000), at: at)

        let before = ranges(Chunker.boundaries(in: original, parameters: parameters))
        let after = Set(ranges(Chunker.boundaries(in: modified, parameters: parameters)))
        // A chunk is unchanged if the same bytes form a chunk in the modified file: same
        // range before the insertion, range shifted by `insert` after it.
        let unchanged = before.filter { r in
            if r.upperBound <= at { return after.contains(r) }
            if r.lowerBound >= at { return after.contains((r.lowerBound + insert)..<(r.upperBound + insert)) }
            return false
        }.count
        #expect(Double(unchanged) >= 0.9 * Double(before.count))
        #expect(before.count - unchanged <= 3, "\(before.count - unchanged) of \(before.count) chunks changed")
    }

    @Test func chunkHashIsBLAKE3OfTheBytes() {
        for count in [0, 1, 55, 56, 63, 64, 65, 127, 128, 129, 1_023, 1_024, 1_025, 100_000] {
            let data = pseudoRandomBytes(count: count, seed: UInt64(count))
            #expect(ChunkHash.of(data).bytes == BLAKE3.hash(data))
            #expect(ChunkHash(bytes: BLAKE3.hash(data)) == ChunkHash.of(data))
        }
        // Computed with PyPI `blake3`: "", "abc", the 448-bit message of FIPS 180-4's examples,
        // and 100,000 bytes of SplitMix64 seeded with 100,000 (as `pseudoRandomBytes`).
        #expect(ChunkHash.of([]).description == "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262")
        #expect(ChunkHash.of(Array("abc".utf8)).description == "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85")
        #expect(ChunkHash.of(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)).description
                == "c19012cc2aaf0dc3d8e5c45a1b79114d2df42abb2a410bf54be09e891af06ff8")
        #expect(ChunkHash.of(pseudoRandomBytes(count: 100_000, seed: 100_000)).description
                == "3161c8e0c0a034bc5610e27874c8f281b71d1ad085210f7ff038a8882bcb83cd")
        // Around BLAKE3's 1 KiB chunk and a whole small file (B's 4 KiB), same generator.
        for (count, digest) in [(1_023, "c630eaee2002a417848c94dd30b1bd06bb171304b358370f5e5ddb22f64fa4bb"),
                                (1_024, "a048778598a59d03fa4fa6b0a1f4545a0a0dbdb40349111dd8709b1fb5279cc1"),
                                (1_025, "58b372c1507951c5a807cd5e628c7ef3e12452bf0f1706059c6bdce2fe2e6338"),
                                (4_096, "523f7a6bde834079f56898db2bc83a18d133ebf7ed12bc40ee9e6d6eadefcc81")] {
            #expect(ChunkHash.of(pseudoRandomBytes(count: count, seed: UInt64(count))).description == digest, "\(count) bytes")
        }
        #expect(ChunkHash(bytes: [UInt8](repeating: 0, count: 31)) == nil)
        let h = ChunkHash(bytes: Array(0..<32))!
        #expect(h.description == "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        #expect(h.bytes == Array(0..<32))
        // Any collection of 32 bytes gives the same hash as its array: a contiguous slice, and
        // one without contiguous storage (the generic path).
        let padded: [UInt8] = [9] + Array(0..<32) + [9]
        #expect(ChunkHash(bytes: padded[1..<33]) == h)
        #expect(ChunkHash(bytes: (0..<32).lazy.map { UInt8($0) }) == h)
        #expect(ChunkHash(bytes: (0..<33).lazy.map { UInt8($0) }) == nil)
    }

    /// Edge cases, through the pure function and the streaming chunker alike.
    struct EdgeCase: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var expectedSizes: [Int]?   // nil: only check the invariants
        var testDescription: String { name }
    }

    static let edgeParameters = ChunkParameters(minSize: 1_024, averageSize: 4_096, maxSize: 16_384)
    static let edgeCases: [EdgeCase] = [
        EdgeCase(name: "0 bytes", bytes: [], expectedSizes: []),
        EdgeCase(name: "1 byte", bytes: [42], expectedSizes: [1]),
        EdgeCase(name: "exactly one min chunk", bytes: pseudoRandomBytes(count: 1_024, seed: 5), expectedSizes: [1_024]),
        EdgeCase(name: "min + 1", bytes: pseudoRandomBytes(count: 1_025, seed: 5), expectedSizes: [1_025]),
        EdgeCase(name: "exactly max, zeros", bytes: [UInt8](repeating: 0, count: 16_384), expectedSizes: [16_384]),
        EdgeCase(name: "max + 1, zeros", bytes: [UInt8](repeating: 0, count: 16_385), expectedSizes: [16_384, 1]),
        EdgeCase(name: "long run of zeros: max-size cuts", bytes: [UInt8](repeating: 0, count: 16_384 * 10 + 5),
                 expectedSizes: Array(repeating: 16_384, count: 10) + [5]),
        EdgeCase(name: "long run of 0xFF: max-size cuts", bytes: [UInt8](repeating: 0xFF, count: 16_384 * 3),
                 expectedSizes: Array(repeating: 16_384, count: 3)),
        EdgeCase(name: "random then zeros then random",
                 bytes: pseudoRandomBytes(count: 50_000, seed: 1) + [UInt8](repeating: 0, count: 100_000)
                     + pseudoRandomBytes(count: 50_000, seed: 2), expectedSizes: nil),
    ]

    @Test(arguments: edgeCases)
    func edgeCase(edge: EdgeCase) throws {
        let parameters = Self.edgeParameters
        let sizes = ranges(Chunker.boundaries(in: edge.bytes, parameters: parameters)).map(\.count)
        if let expected = edge.expectedSizes { #expect(sizes == expected) }
        #expect(sizes.reduce(0, +) == edge.bytes.count)
        #expect(sizes.allSatisfy { $0 >= 1 && $0 <= parameters.maxSize })

        try withTemporaryDirectory { dir in
            let path = dir + "/f"
            try writeFile(path, edge.bytes)
            let streamed = try FileChunker(path: path, parameters: parameters, readBlockSize: 4_096).allChunks()
            #expect(streamed == referenceChunks(edge.bytes, parameters: parameters))
            let manifest = try FileChunker.manifest(ofFileAt: path, parameters: parameters)
            #expect(manifest.fileSize == UInt64(edge.bytes.count))
            #expect(manifest.chunks == streamed)
        }
    }

    /// The documented cut, one byte at a time (the rule `cutLength` unrolls).
    static func byteAtATimeCut(_ bytes: ArraySlice<UInt8>, parameters p: ChunkParameters) -> Int {
        let count = bytes.count
        if count <= p.minSize { return count }
        let end = min(count, p.maxSize), normal = min(p.averageSize, end)
        var fp: UInt64 = 0
        for i in p.minSize..<end {
            fp = (fp &<< 1) &+ Chunker.gearTable[Int(bytes[bytes.startIndex + i])]
            if fp & (i < normal ? p.strictMask : p.looseMask) == 0 { return i + 1 }
        }
        return end
    }

    /// Every cut position modulo the eight-byte step, before and after the average, and
    /// every input length up to a few chunks: the unrolled loop cuts where the rule does.
    @Test(arguments: smallParameters + [ChunkParameters(minSize: 5, averageSize: 32, maxSize: 77),
                                        ChunkParameters(minSize: 13, averageSize: 64, maxSize: 64)])
    func unrolledCutEqualsByteAtATime(parameters: ChunkParameters) {
        let data = pseudoRandomBytes(count: 300_000, seed: UInt64(parameters.maxSize))
        var strictEnds = Set<Int>(), looseEnds = Set<Int>()
        for start in 0..<40 {
            // Other content for each start: content-defined cuts would resynchronise.
            let data = pseudoRandomBytes(count: 300_000, seed: UInt64(parameters.maxSize * 100 + start))
            var offset = start
            while offset < data.count {
                let rest = data[offset...]
                let expected = Self.byteAtATimeCut(rest, parameters: parameters)
                let got = rest.withUnsafeBufferPointer {
                    Chunker.cutLength($0.baseAddress!, count: $0.count, parameters: parameters)
                }
                #expect(got == expected, "offset \(offset)")
                if got != expected { return }
                if got > parameters.minSize && got < min(rest.count, parameters.maxSize) {
                    // A cut by the mask, by its place in the eight-byte steps of its scan
                    // (the strict one from minSize, the loose one from the average).
                    let normal = min(parameters.averageSize, rest.count, parameters.maxSize)
                    if got <= normal {
                        strictEnds.insert((got - parameters.minSize - 1) % 8)
                    } else {
                        looseEnds.insert((got - normal - 1) % 8)
                    }
                }
                offset += got
            }
        }
        for count in 0...(3 * parameters.maxSize) where count <= 4_000 {
            let slice = data[1_000..<(1_000 + count)]
            let got = slice.withUnsafeBufferPointer {
                count == 0 ? 0 : Chunker.cutLength($0.baseAddress!, count: count, parameters: parameters)
            }
            #expect(got == Self.byteAtATimeCut(slice, parameters: parameters), "count \(count)")
        }
        #expect(strictEnds.count == 8 && (looseEnds.count == 8 || parameters.averageSize == parameters.maxSize),
                "mask cuts landed on every byte of the eight-byte step in both scans: \(strictEnds.sorted()) \(looseEnds.sorted())")
    }

    @Test func zeroRunInsideRandomDataCutsAtMax() {
        // Zeros never satisfy the mask (the gear fingerprint of a zero run is constant
        // and nonzero in the masked bits), so a run of zeros is cut into max-size pieces.
        let p = Self.edgeParameters
        let data = [UInt8](repeating: 0, count: 200_000)
        let sizes = ranges(Chunker.boundaries(in: data, parameters: p)).map(\.count)
        #expect(sizes.dropLast().allSatisfy { $0 == p.maxSize })
    }

    struct SizeRule: Sendable, CustomTestStringConvertible {
        var fileSize: UInt64
        var average: Int
        var testDescription: String { "\(fileSize) bytes → avg \(average)" }
    }

    @Test(arguments: [
        SizeRule(fileSize: 0, average: 64 << 10),
        SizeRule(fileSize: 1, average: 64 << 10),
        SizeRule(fileSize: 2_000 * 65_536, average: 64 << 10),
        SizeRule(fileSize: 2_000 * 65_536 + 1, average: 128 << 10),
        SizeRule(fileSize: 1 << 30, average: 1 << 20),
        SizeRule(fileSize: 2_000 << 22, average: 4 << 20),
        SizeRule(fileSize: 1 << 40, average: 4 << 20),
        SizeRule(fileSize: .max, average: 4 << 20),
    ])
    func chunkSizeRule(rule: SizeRule) {
        let p = ChunkParameters.forFileSize(rule.fileSize)
        #expect(p.averageSize == rule.average)
        #expect(p.minSize == rule.average / 4)
        #expect(p.maxSize == rule.average * 4)
        #expect(p.maxSize <= ChunkParameters.largestMax)
    }
}

/// The streaming chunker must cut exactly like the pure function whatever the read
/// block size and threading, and hash every chunk.
@Suite struct FileChunkerTests {
    static let data = pseudoRandomBytes(count: 3 << 20, seed: 2024)

    @Test(arguments: [1, 7, 4_096, 65_536, 1 << 20, 8 << 20], [1, 2])
    func streamingEqualsPureFunction(blockSize: Int, threads: Int) throws {
        let parameters = ChunkParameters(minSize: 1_024, averageSize: 4_096, maxSize: 16_384)
        let expected = referenceChunks(Self.data, parameters: parameters)
        try withTemporaryDirectory { dir in
            let path = dir + "/f"
            try writeFile(path, Self.data)
            let chunker = try FileChunker(path: path, parameters: parameters, readBlockSize: blockSize, hashThreads: threads)
            let chunks = try chunker.allChunks()
            #expect(chunks == expected)
            #expect(chunker.bytesChunked == UInt64(Self.data.count))
            #expect(try chunker.next() == nil)
        }
    }

    /// Two threads without reading ahead (the largest chunk sizes, or a small budget): each
    /// block is read by the cut itself, and the chunks are the same.
    @Test(arguments: [1, 4_096, 65_536, 1 << 20])
    func twoThreadsWithoutReadingAheadEqualThePureFunction(blockSize: Int) throws {
        let parameters = ChunkParameters(minSize: 1_024, averageSize: 4_096, maxSize: 16_384)
        let expected = referenceChunks(Self.data, parameters: parameters)
        try withTemporaryDirectory { dir in
            let path = dir + "/f"
            try writeFile(path, Self.data)
            let fd = open(path, O_RDONLY)
            defer { close(fd) }
            let chunker = FileChunker(fileDescriptor: fd, parameters: parameters, readBlockSize: blockSize, hashThreads: 2,
                                      readAheadBudget: 0)
            #expect(try chunker.allChunks() == expected)
        }
    }

    /// A read that fails stops the chunker: every later `next()` throws again, never nil (an
    /// empty file's answer) or chunks cut from a half-rotated window.
    @Test(arguments: [1, 2])
    func aFailedReadIsThrownAgainByEveryLaterCall(threads: Int) throws {
        try withTemporaryDirectory { dir in
            let fd = open(dir, O_RDONLY | O_DIRECTORY)   // pread fails: EISDIR
            defer { close(fd) }
            let chunker = FileChunker(fileDescriptor: fd, path: dir, parameters: ChunkParameters.forFileSize(1 << 20),
                                      hashThreads: threads)
            #expect(throws: FileError.self) { try chunker.next() }
            #expect(throws: FileError.self, "the second call too") { try chunker.next() }
        }
    }

    @Test func defaultParametersComeFromTheFileSize() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/f"
            try writeFile(path, Self.data)
            let chunker = try FileChunker(path: path)
            #expect(chunker.parameters == ChunkParameters.forFileSize(UInt64(Self.data.count)))
            let manifest = try FileChunker.manifest(ofFileAt: path)
            #expect(manifest.chunks == referenceChunks(Self.data, parameters: chunker.parameters))
        }
    }

    @Test func missingFileIsNotFound() {
        #expect(throws: FileError.self) { try FileChunker(path: "/nonexistent/syncpeer/file") }
        do {
            _ = try FileChunker(path: "/nonexistent/syncpeer/file")
        } catch {
            #expect(error.kind == .notFound)
        }
    }
}
