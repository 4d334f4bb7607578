internal import BLAKE3Lanes

// This module is compiled for CPUs with AVX2 (Package.swift: -target-cpu); PeerCrypto calls
// it only after checking that the CPU has those features (`BLAKE3.lanes`).

/// `blake3CompressLanes` over 8 lanes, compiled with AVX2.
public func blake3Compress8(_ p: UnsafeRawPointer, stride: Int, blocks: Int, key: UnsafePointer<UInt32>,
                             counter: UInt64, counterStep: UInt64, flags: UInt32, firstFlags: UInt32, lastFlags: UInt32,
                             out: UnsafeMutablePointer<UInt32>) {
    blake3CompressLanes(SIMD8<UInt32>.self, p, stride: stride, blocks: blocks, key: key, counter: counter,
                        counterStep: counterStep, flags: flags, firstFlags: firstFlags, lastFlags: lastFlags, out: out)
}
