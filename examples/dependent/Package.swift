// swift-tools-version:6.0
// A package outside syncpeer's that uses its library as any other package would: by URL
// and version. SwiftPM refuses a versioned dependency with unsafe compiler flags in any
// target it uses, so this builds only while syncpeer's manifest has none
// (Tests/EndToEndTests/DependentPackageTests.swift builds it against a tagged copy).
import Foundation
import PackageDescription

/// Where syncpeer's git repository is: SYNCPEER_PACKAGE_URL, else this checkout's own
/// repository (two levels up), which then needs a version tag (0.1.0 or later).
let syncpeerURL = Context.environment["SYNCPEER_PACKAGE_URL"]
    ?? URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent().deletingLastPathComponent().absoluteString
/// SwiftPM names a dependency by its URL's last component, without ".git".
let syncpeerIdentity = URL(string: syncpeerURL)!.deletingPathExtension().lastPathComponent.lowercased()

let package = Package(
    name: "syncpeer-dependent",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(url: syncpeerURL, from: "0.1.0"),
    ],
    targets: [
        .executableTarget(name: "dependent", dependencies: [.product(name: "Syncpeer", package: syncpeerIdentity)]),
    ]
)
