// swift-tools-version:6.0
// syncpeer: encrypted peer-to-peer file synchronization for Linux.
//
// Layers (dependencies point down only):
//
//   syncpeer (executable) → SyncpeerCLI → SyncpeerWeb → SyncEngine → PeerNet / PeerIndex / PeerFiles
//                                                     → PeerWire / PeerCrypto → CSodium / COpenSSL / CSQLite
//                                                                             → CBLAKE3
//   PeerIndex, PeerFiles and PeerWire → PeerModel (the file model; no dependencies)
import PackageDescription

/// Settings applied to every Swift target: Swift 6 language mode (strict concurrency)
/// plus upcoming features that make code more explicit.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

// No target has unsafe flags (SwiftPM refuses those in a package used as a versioned
// dependency; Tests/EndToEndTests/DependentPackageTests.swift checks it): BLAKE3's SIMD
// kernels are C functions that name their instruction set in an attribute (CBLAKE3).

var package = Package(
    name: "syncpeer",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "syncpeer", targets: ["syncpeer"]),
        // The public Swift API in Multipeer Connectivity's shape (docs/API.md).
        .library(name: "Syncpeer", targets: ["Syncpeer"]),
    ],
    targets: [
        // C libraries from Debian, each imported by exactly one Swift module.
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        // OpenSSL: libcrypto (AES-256-GCM and SHA-256, where it is measurably faster than
        // libsodium on AES-NI/SHA-NI CPUs) and libssl (the TLS client for relays and global
        // discovery servers, which authenticate a device by its certificate).
        .systemLibrary(name: "COpenSSL", pkgConfig: "libssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),

        // Crypto: keys, device IDs, BLAKE2b, SHA-256, BLAKE3, AES-GCM, the Noise Protocol Framework
        // (only importer of CSodium and COpenSSL).
        .target(name: "PeerCrypto", dependencies: ["CSodium", "COpenSSL", "CBLAKE3"]),
        // BLAKE3's compression function in C: one block of one input, and 4, 8 or 16 inputs
        // side by side in SIMD lanes (SSE2; AVX2 and AVX-512 by function attribute, chosen by
        // CPUID at run time). Imported by PeerCrypto only.
        .target(name: "CBLAKE3"),
        // Model: the one file model (entry, kind, version vector) that the scanner, index,
        // wire and planner share; no dependencies.
        .target(name: "PeerModel"),
        // Wire: framing and typed application frames; pure, no I/O.
        .target(name: "PeerWire", dependencies: ["PeerModel"]),
        // Index: SQLite wrapper, migrations, the node's database (only importer of CSQLite).
        .target(name: "PeerIndex", dependencies: ["CSQLite", "PeerModel"]),
        // Files: scanner, chunker, watcher, atomic writer (grows with the resources and sync issues).
        .target(name: "PeerFiles", dependencies: ["PeerCrypto", "PeerModel"]),
        // Net: TCP, the secure channel, discovery (grows with the sessions and discovery issues).
        .target(name: "PeerNet", dependencies: ["PeerWire", "PeerCrypto"]),
        // Engine: the node (composition root), identity, sessions, transfers, sync; emits events, never prints.
        .target(name: "SyncEngine", dependencies: ["PeerNet", "PeerIndex", "PeerFiles", "PeerWire", "PeerCrypto", "PeerModel"]),
        // Magic Wormhole interop (`send --code`, `receive CODE`): the mailbox client, the
        // SPAKE2 session, Transit and the file-transfer offer/answer; between two syncpeers the
        // chunked, resumable transfer (`resume-v1`: PeerFiles' chunker and partial files).
        // Silent like the engine.
        .target(name: "Wormhole", dependencies: ["PeerNet", "PeerFiles", "PeerCrypto"]),
        // The local web dashboard (`daemon --gui`): a bounded HTTP/1.1 server, the page's
        // embedded assets (web/), a client of the control socket like the CLI.
        .target(name: "SyncpeerWeb", dependencies: ["SyncEngine", "PeerNet", "PeerCrypto"]),
        // CLI: argument parser, commands, rendering of events. No protocol or sync logic.
        .target(name: "SyncpeerCLI", dependencies: ["SyncEngine", "SyncpeerWeb", "Wormhole"]),
        .executableTarget(name: "syncpeer", dependencies: ["SyncpeerCLI"]),
        // The public API for Swift programs: peers, advertiser/browser, invitations, sessions,
        // messages, resources with a Progress, streams, folders (docs/API.md).
        .target(name: "Syncpeer", dependencies: ["SyncEngine", "PeerCrypto"]),
        // examples/: small programs that use only the public API (examples/README.md).
        .executableTarget(name: "syncpeer-chat", dependencies: ["Syncpeer"], path: "examples/chat"),
        .executableTarget(name: "syncpeer-drop", dependencies: ["Syncpeer"], path: "examples/drop"),
        .executableTarget(name: "syncpeer-mirror", dependencies: ["Syncpeer"], path: "examples/mirror"),
        // Microbenchmarks of this machine's limits (crypto, chunking) for `make bench`; not a
        // product and not a dependency of `syncpeer`.
        .executableTarget(name: "syncpeer-bench", dependencies: ["PeerCrypto", "PeerFiles", "PeerIndex", "PeerNet", "PeerModel"], path: "Sources/SyncpeerBench"),

        // Helpers shared by the test targets (a seeded generator); not part of the product.
        .target(name: "TestKit", path: "Tests/TestKit", exclude: ["Servers"]),
        .testTarget(name: "PeerCryptoTests", dependencies: ["PeerCrypto"], exclude: ["Interop", "Vectors"]),
        .testTarget(name: "PeerModelTests", dependencies: ["PeerModel", "TestKit"]),
        .testTarget(name: "PeerWireTests", dependencies: ["PeerWire", "PeerModel", "TestKit"]),
        .testTarget(name: "PeerNetTests", dependencies: ["PeerNet", "PeerWire", "PeerCrypto", "TestKit"], exclude: ["Discovery/Interop", "Discovery/Captures"]),
        .testTarget(name: "PeerIndexTests", dependencies: ["PeerIndex", "PeerModel"]),
        .testTarget(name: "PeerFilesTests", dependencies: ["PeerFiles", "PeerCrypto", "PeerModel", "TestKit"]),
        .testTarget(name: "SyncEngineTests", dependencies: ["SyncEngine", "PeerWire", "PeerIndex", "PeerFiles", "PeerCrypto", "PeerModel", "TestKit"]),
        .testTarget(name: "SyncpeerCLITests", dependencies: ["SyncpeerCLI", "SyncEngine", "PeerCrypto"]),
        .testTarget(name: "WormholeTests", dependencies: ["Wormhole", "PeerNet", "PeerFiles", "PeerCrypto"], exclude: ["Zips"]),
        .testTarget(name: "SyncpeerTests", dependencies: ["Syncpeer"]),
        .testTarget(name: "SyncpeerWebTests", dependencies: ["SyncpeerWeb", "SyncEngine", "TestKit"]),
        // Runs the built `syncpeer` binary as real processes in temporary homes.
        .testTarget(name: "EndToEndTests", dependencies: ["syncpeer", "syncpeer-chat", "syncpeer-drop", "syncpeer-mirror", "PeerNet", "PeerWire", "PeerCrypto", "PeerFiles", "PeerIndex", "PeerModel", "TestKit"], exclude: ["Interop", "Browser", "PowerLoss"]),
    ]
)

for target in package.targets where target.type != .system && target.name != "CBLAKE3" {
    target.swiftSettings = (target.swiftSettings ?? []) + strictSettings
}
