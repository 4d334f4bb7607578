// syncpeer-bench: microbenchmarks of the limits a transfer cannot beat on this machine,
// through the same modules the product uses (PeerCrypto over libsodium and libcrypto, PeerFiles).
// Not part of the `syncpeer` product; `make bench` (bench/run.sh) runs it and collects its JSON.
//
//   syncpeer-bench crypto [--seconds S]          ChaCha20-Poly1305 IETF and AES-256-GCM
//                                                (64 KiB messages, seal and open; also the
//                                                Noise transport path with each), BLAKE2b-256
//                                                SHA-256 and BLAKE3 (1 MiB buffers; also
//                                                SHA-256 and BLAKE3 of 4 KiB inputs, BLAKE3
//                                                of 16 KiB inputs)
//   syncpeer-bench chunk PATH [--runs N]         FastCDC + BLAKE3 over a file (FileChunker,
//                                                as `syncpeer send` prepares an offer)
//
// Prints one JSON object on stdout. Rates are in MB/s (10^6 bytes per second); every
// figure is the best of several timed runs (the median is given too), with the CPU time
// per GB (user + system, all threads) because on a shared machine that is the stable one.
#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import FoundationEssentials
import PeerCrypto
import PeerFiles
import PeerNet

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func s(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return s(usage.ru_utime) + s(usage.ru_stime)
}

struct Measurement {
    var name: String
    var best: Double       // MB/s
    var median: Double     // MB/s
    var cpuPerGB: Double   // CPU seconds per 10^9 bytes (median run)
    var bytesPerRun: Int
    var runs: Int
    var extra: [String: Any] = [:]

    var json: [String: Any] {
        var out: [String: Any] = ["name": name, "mb_s": round1(best), "median_mb_s": round1(median),
                                  "cpu_s_per_gb": (cpuPerGB * 1000).rounded() / 1000,
                                  "bytes_per_run": bytesPerRun, "runs": runs]
        for (k, v) in extra { out[k] = v }
        return out
    }
}

func round1(_ x: Double) -> Double { (x * 10).rounded() / 10 }

/// Runs `body` (which processes `bytes` bytes) `runs` times after one warm-up run.
func measure(_ name: String, bytes: Int, runs: Int, _ body: () throws -> Void) rethrows -> Measurement {
    try body()  // warm-up: page faults, lazy initialisation, CPU frequency
    var rates: [Double] = []
    var cpu: [Double] = []
    for _ in 0..<runs {
        let c0 = cpuSeconds()
        let t0 = now()
        try body()
        let t = now() - t0
        cpu.append(cpuSeconds() - c0)
        rates.append(Double(bytes) / 1e6 / t)
    }
    rates.sort()
    cpu.sort()
    let m = Measurement(name: name, best: rates.last!, median: rates[runs / 2],
                        cpuPerGB: cpu[runs / 2] / (Double(bytes) / 1e9), bytesPerRun: bytes, runs: runs)
    fputs("[syncpeer-bench] \(name): best \(Int(m.best)) MB/s, median \(Int(m.median)) MB/s, CPU \(PlainText.format("%.2f", m.cpuPerGB)) s/GB\n", stderr)
    return m
}

/// Bytes a loop should process so that one run lasts about `seconds` at `rate` MB/s.
func sized(_ unit: Int, seconds: Double, guessMBs: Double) -> Int {
    max(1, Int(seconds * guessMBs * 1e6) / unit)
}

func cryptoBenchmarks(seconds: Double, runs: Int) -> [String: Any] {
    var results: [String: Any] = [:]
    let key = SecureBytes.random(count: ChaChaPoly.keyLength)
    let empty = [UInt8]()

    // ChaCha20-Poly1305 IETF on 64 KiB messages (the wire uses ≤ 65,535-byte messages).
    let messageSize = 64 << 10
    let message = secureRandomBytes(messageSize)
    let messages = sized(messageSize, seconds: seconds, guessMBs: 1000)
    var sink: UInt8 = 0
    // One AEAD, sealing fresh nonces and opening one sealed message, under `key` prefix
    // `name` in the results.
    func aead(_ label: String, _ name: String, seal: (UInt64, [UInt8]) -> [UInt8], open: ([UInt8]) -> [UInt8]?) {
        let sealing = measure("\(label) seal 64 KiB", bytes: messages * messageSize, runs: runs) {
            for i in 0..<messages {
                let c = seal(UInt64(i), message)
                sink &+= c[i & 0xFFFF]
            }
        }
        results["\(name)_seal"] = sealing.json
        let sealed = seal(7, message)
        let opening = measure("\(label) open 64 KiB", bytes: messages * messageSize, runs: runs) {
            for i in 0..<messages {
                let p = open(sealed) ?? []
                sink &+= p[i & 0xFFFF]
            }
        }
        results["\(name)_open"] = opening.json
    }
    aead("chacha20poly1305_ietf", "chacha20poly1305",
         seal: { ChaChaPoly.seal(key: key, nonce: $0, ad: empty, plaintext: $1) },
         open: { try? ChaChaPoly.open(key: key, nonce: 7, ad: empty, ciphertext: $0) })
    // AES-256-GCM (OpenSSL) on the same messages.
    aead("aes256gcm", "aes256gcm",
         seal: { AESGCM.seal(key: key, nonce: $0, ad: empty, plaintext: $1) },
         open: { try? AESGCM.open(key: key, nonce: 7, ad: empty, ciphertext: $0) })

    // The transport path of a session: NoiseCipherState with full-size plaintexts
    // (65,519 bytes + 16-byte tag = 65,535), sealed and opened in place as SecureChannel
    // does; protocol version 2's cipher (AESGCM) and version 1's (ChaChaPoly).
    let noiseMessages = sized(65_519, seconds: seconds, guessMBs: 1000)
    for (cipher, label, resultKey) in [(NoiseCipherFunction.aesGCM, "AESGCM", "noise_encrypt_plus_decrypt"),
                                       (.chaChaPoly, "ChaChaPoly", "noise_chachapoly_encrypt_plus_decrypt")] {
        guard let sender = try? NoiseCipherState(cipher, key: key), let receiver = try? NoiseCipherState(cipher, key: key) else { continue }
        let plain = secureRandomBytes(65_519)
        var buffer = [UInt8](repeating: 0, count: 65_535)
        let noise = measure("Noise transport \(label) encrypt + decrypt in place, 65,519-byte plaintexts",
                            bytes: noiseMessages * plain.count, runs: runs) {
            buffer.withUnsafeMutableBytes { b in
                plain.withUnsafeBytes { p in
                    for _ in 0..<noiseMessages {
                        try? sender.encrypt(p, into: b.baseAddress!)
                        _ = try? receiver.decrypt(UnsafeRawBufferPointer(b), into: b.baseAddress!)
                        sink &+= b[0]
                    }
                }
            }
        }
        results[resultKey] = noise.json
    }

    // BLAKE2b-256 (the chunk hash before protocol version 3), SHA-256 (protocol 3) and BLAKE3 (since protocol 4) on 1 MiB buffers.
    let bufferSize = 1 << 20
    let buffer = secureRandomBytes(bufferSize)
    let buffers = sized(bufferSize, seconds: seconds, guessMBs: 800)
    let blake = measure("BLAKE2b-256 1 MiB buffers", bytes: buffers * bufferSize, runs: runs) {
        var hasher = BLAKE2b.Hasher(length: 32)
        buffer.withUnsafeBytes { raw in
            for _ in 0..<buffers { hasher.update(raw) }
        }
        sink &+= hasher.finalize()[0]
    }
    results["blake2b"] = blake.json
    let sha = measure("SHA-256 1 MiB buffers", bytes: buffers * bufferSize, runs: runs) {
        var hasher = SHA256.Hasher()
        buffer.withUnsafeBytes { raw in
            for _ in 0..<buffers { hasher.update(raw) }
        }
        sink &+= hasher.finalize()[0]
    }
    results["sha256"] = sha.json
    // BLAKE3, each 1 MiB buffer one digest (as a content chunk is hashed), at the widest lane
    // count this CPU runs (SYNCPEER_BLAKE3_LANES=4 or 8 lowers it).
    var digest = [UInt8](repeating: 0, count: BLAKE3.digestLength)
    let blake3 = measure("BLAKE3 1 MiB buffers, \(BLAKE3.lanes) lanes", bytes: buffers * bufferSize, runs: runs) {
        buffer.withUnsafeBytes { raw in
            digest.withUnsafeMutableBytes { out in
                for _ in 0..<buffers { BLAKE3.hash(raw, into: out.baseAddress!) }
            }
        }
        sink &+= digest[0]
    }
    results["blake3"] = blake3.json
    results["blake3_lanes"] = BLAKE3.lanes
    // Small files' chunks (workload B: 4 KiB files, each one chunk): one digest per 4 KiB,
    // SHA-256 (one-shot, libcrypto) against BLAKE3; and BLAKE3 of 16 KiB inputs (one pass of
    // 16 lanes, the tree's smallest full width).
    for (key, name, small, hash) in [("sha256_4k", "SHA-256 4 KiB inputs", 4096, SHA256.hash(_:into:)),
                                     ("blake3_4k", "BLAKE3 4 KiB inputs", 4096, BLAKE3.hash(_:into:)),
                                     ("blake3_16k", "BLAKE3 16 KiB inputs", 16384, BLAKE3.hash(_:into:))]
        as [(String, String, Int, (UnsafeRawBufferPointer, UnsafeMutableRawPointer) -> Void)] {
        let smallCount = buffers * (bufferSize / small)
        let perBuffer = bufferSize / small
        let figure = measure(name, bytes: smallCount * small, runs: runs) {
            buffer.withUnsafeBytes { raw in
                digest.withUnsafeMutableBytes { out in
                    for i in 0..<smallCount {
                        hash(UnsafeRawBufferPointer(rebasing: raw[(i % perBuffer) * small ..< (i % perBuffer + 1) * small]), out.baseAddress!)
                    }
                }
            }
            sink &+= digest[0]
        }
        results[key] = figure.json
    }
    results["sink"] = Int(sink)
    return results
}

func chunkBenchmarks(path: String, runs: Int) throws -> [String: Any] {
    var st = stat()
    guard stat(path, &st) == 0 else { throw POSIXError(.ENOENT) }
    let size = Int(st.st_size)
    let params = ChunkParameters.forFileSize(UInt64(size))
    var results: [String: Any] = ["file_bytes": size, "parameters": "\(params)"]
    var chunkCount = 0
    for threads in [2, 1] {
        let m = try measure("FileChunker chunk + hash, hashThreads \(threads)", bytes: size, runs: runs) {
            let chunker = try FileChunker(path: path, hashThreads: threads)
            var count = 0
            while try chunker.next() != nil { count += 1 }
            chunkCount = count
        }
        results["filechunker_threads\(threads)"] = m.json
    }
    results["chunks"] = chunkCount
    // Cutting alone (no hashing), in memory: the FastCDC loop itself.
    let sample = min(size, 256 << 20)
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw POSIXError(.EIO) }
    defer { close(fd) }
    let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: sample, alignment: 64)
    defer { memory.deallocate() }
    var done = 0
    while done < sample {
        let n = pread(fd, memory.baseAddress! + done, sample - done, off_t(done))
        guard n > 0 else { throw POSIXError(.EIO) }
        done += n
    }
    let cut = measure("FastCDC cut only, in memory, 1 thread", bytes: sample, runs: runs) {
        _ = Chunker.boundaries(in: UnsafeRawBufferPointer(memory), parameters: params)
    }
    results["fastcdc_cut_only"] = cut.json
    return results
}

/// Bytes a peer must fetch when `change` bytes are rewritten in place at a random offset
/// (workload C), for chunk parameters of a 1 GiB file: every chunk after the change whose
/// boundaries differ or that overlaps the changed range is new. In memory on `bufferBytes`
/// of random data, `trials` offsets (the same for each parameter set). Each trial cuts again
/// only from the last old boundary before the change until a new boundary past the change
/// lands on an old one (from there on the cuts are the old ones). `delta_*` counts what the
/// peer fetches as block deltas instead (`BlockDelta`): per new chunk of at least
/// `BlockDelta.minimumChunk`, its 16 KiB blocks that overlap the change, the bitmap and the
/// request's sums; smaller chunks whole.
func deltaBenchmarks(bufferBytes: Int, change: Int, trials: Int) -> [String: Any] {
    var generator = SystemRandomNumberGenerator()
    let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferBytes, alignment: 64)
    defer { memory.deallocate() }
    let words = memory.bindMemory(to: UInt64.self)
    for i in words.indices { words[i] = generator.next() }
    let offsets = (0..<trials).map { _ in Int.random(in: change..<(bufferBytes - 2 * change), using: &generator) }
    let replacements = (0..<trials).map { _ in (0..<change).map { _ in UInt8.random(in: 0...255, using: &generator) } }
    let candidates: [(String, ChunkParameters)] = [
        ("forFileSize(1 GiB)", ChunkParameters.forFileSize(1 << 30)),
        ("avg 512 KiB", ChunkParameters(minSize: 128 << 10, averageSize: 512 << 10, maxSize: 2 << 20)),
        ("avg 512 KiB max 1 MiB", ChunkParameters(minSize: 128 << 10, averageSize: 512 << 10, maxSize: 1 << 20)),
        ("avg 512 KiB min 64 KiB max 1 MiB", ChunkParameters(minSize: 64 << 10, averageSize: 512 << 10, maxSize: 1 << 20)),
        ("avg 256 KiB", ChunkParameters(minSize: 64 << 10, averageSize: 256 << 10, maxSize: 1 << 20)),
        ("avg 256 KiB max 512 KiB", ChunkParameters(minSize: 64 << 10, averageSize: 256 << 10, maxSize: 512 << 10)),
        ("avg 256 KiB min 32 KiB", ChunkParameters(minSize: 32 << 10, averageSize: 256 << 10, maxSize: 1 << 20)),
        ("avg 128 KiB", ChunkParameters(minSize: 32 << 10, averageSize: 128 << 10, maxSize: 512 << 10)),
    ]
    var results: [String: Any] = ["buffer_bytes": bufferBytes, "change_bytes": change, "trials": trials]
    let bytes = memory.baseAddress!.assumingMemoryBound(to: UInt8.self)
    for (name, params) in candidates {
        let before = Chunker.boundaries(in: UnsafeRawBufferPointer(memory), parameters: params)
        let oldEnds = Set(before)
        var fetched: [Int] = []
        var deltas: [Int] = []
        for (trial, offset) in offsets.enumerated() {
            let saved = Array(UnsafeRawBufferPointer(rebasing: memory[offset..<(offset + change)]))
            replacements[trial].withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: memory[offset..<(offset + change)]).copyMemory(from: $0) }
            // The last old boundary at or before the change: cuts before it are unchanged.
            var low = 0, high = before.count
            while low < high { let mid = (low + high) / 2; if before[mid] <= offset { low = mid + 1 } else { high = mid } }
            var start = low == 0 ? 0 : before[low - 1]
            var total = 0
            var delta = 0
            while start < bufferBytes {
                let end = start + Chunker.cutLength(bytes + start, count: bufferBytes - start, parameters: params)
                let overlaps = start < offset + change && end > offset
                if overlaps || !oldEnds.contains(end) || !(start == 0 || oldEnds.contains(start)) {
                    total += end - start
                    delta += deltaBytes(start: start, end: end, changeStart: offset, changeEnd: offset + change)
                }
                start = end
                if end >= offset + change && oldEnds.contains(end) { break }
            }
            fetched.append(total)
            deltas.append(delta)
            saved.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: memory[offset..<(offset + change)]).copyMemory(from: $0) }
        }
        fetched.sort()
        deltas.sort()
        results[name] = [
            "delta_median_bytes": deltas[deltas.count / 2], "delta_p99_bytes": deltas[deltas.count * 99 / 100],
            "delta_max_bytes": deltas.last ?? 0, "delta_over_4_mib": deltas.filter { $0 > 4 << 20 }.count,
            "parameters": "\(params)", "chunks_per_gib": before.count * (1 << 30) / bufferBytes,
            "min_bytes": fetched.first ?? 0, "median_bytes": fetched[fetched.count / 2],
            "p99_bytes": fetched[fetched.count * 99 / 100], "max_bytes": fetched.last ?? 0,
            "over_4_mib": fetched.filter { $0 > 4 << 20 }.count, "over_3_mib": fetched.filter { $0 > 3 << 20 }.count,
        ] as [String: Any]
    }
    return results
}

/// Bytes on the wire for a new chunk [start, end) fetched as a block delta against the old
/// file, where [changeStart, changeEnd) was rewritten in place with random bytes: the sums
/// asked with, the bitmap, and the blocks that overlap the change; a small chunk whole.
func deltaBytes(start: Int, end: Int, changeStart: Int, changeEnd: Int) -> Int {
    let size = end - start
    guard size >= BlockDelta.minimumChunk else { return size }
    var total = BlockDelta.blockCount(size: size) * BlockDelta.sumSize + BlockDelta.bitmapSize(size: size)
    for block in stride(from: start, to: end, by: BlockDelta.blockSize) {
        let blockEnd = min(end, block + BlockDelta.blockSize)
        if block < changeEnd && blockEnd > changeStart { total += blockEnd - block }
    }
    return total
}

func emit(_ object: [String: Any]) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    print(String(decoding: try! encoder.encode(JSONValue(any: object)!), as: UTF8.self))
}

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String) -> String? {
    guard let i = arguments.firstIndex(of: "--" + name), i + 1 < arguments.count else { return nil }
    return arguments[i + 1]
}
let runs = option("runs").flatMap(Int.init) ?? 3

switch arguments.first {
case "crypto":
    let seconds = option("seconds").flatMap(Double.init) ?? 1.0
    emit(cryptoBenchmarks(seconds: seconds, runs: runs))
case "chunk":
    guard arguments.count >= 2 else {
        fputs("usage: syncpeer-bench chunk PATH [--runs N]\n", stderr)
        exit(2)
    }
    do { emit(try chunkBenchmarks(path: arguments[1], runs: runs)) } catch {
        fputs("syncpeer-bench: \(arguments[1]): \(error)\n", stderr)
        exit(1)
    }
case "delta":
    emit(deltaBenchmarks(bufferBytes: (option("mib").flatMap(Int.init) ?? 256) << 20, change: 1 << 20,
                         trials: option("trials").flatMap(Int.init) ?? 30))
case "index":
    let directory = arguments.count >= 2 && !arguments[1].hasPrefix("--") ? arguments[1] : FileManager.default.temporaryDirectory.path
    do {
        emit(try indexBenchmarks(directory: directory, files: option("files").flatMap(Int.init) ?? 10_000,
                                 batch: option("batch").flatMap(Int.init) ?? 1_000, runs: runs))
    } catch {
        fputs("syncpeer-bench: index: \(error)\n", stderr)
        exit(1)
    }
default:
    fputs("usage: syncpeer-bench crypto [--seconds S] [--runs N] | chunk PATH [--runs N] | delta [--mib M] [--trials T] | index [DIR] [--files N] [--batch B] [--runs N]\n", stderr)
    exit(2)
}
