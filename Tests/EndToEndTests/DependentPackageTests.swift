import Foundation
import Testing

/// syncpeer as a versioned dependency (issue 42, point 4): examples/dependent, a package of
/// its own, names syncpeer by URL and version (`from: "0.1.0"`). SwiftPM refuses such a
/// dependency when a target it uses has unsafe compiler flags ("contains unsafe build
/// flags"); path dependencies and the root package are exempt, so the test makes what a user
/// would fetch: a git repository of this tree's files, tagged 0.1.0 (the version
/// examples/dependent asks for), in a temporary directory, reached by a file:// URL.
@Suite struct DependentPackageTests {
    static let swift = ProcessInfo.processInfo.environment["PATH"].flatMap { path in
        path.split(separator: ":").map { "\($0)/swift" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    } ?? "/opt/swift/usr/bin/swift"

    /// A git repository at `directory/syncpeer` holding this checkout's files as they are on
    /// disk now (tracked or new, not ignored), committed and tagged 0.1.0.
    static func taggedCopy(in directory: String) throws -> String {
        let copy = directory + "/syncpeer"
        let made = try InstallTests.run("/bin/bash", ["-c", """
            set -e
            mkdir -p "$COPY"
            git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$COPY"
            cd "$COPY"
            git init -q
            git add -A
            git -c user.name=test -c user.email=test@syncpeer.invalid commit -q -m "syncpeer, tagged for a dependent package"
            git tag 0.1.0
            """], environment: ["COPY": copy])
        #expect(made.status == 0, "\(made.output)")
        return copy
    }

    /// SwiftPM resolves syncpeer at 0.1.0 by URL and plans the dependent's build of the
    /// `Syncpeer` product (every target of it loaded: that is where unsafe flags are refused),
    /// without compiling it.
    @Test func aPackageCanDependOnSyncpeerByURLAndVersion() throws {
        let temp = NSTemporaryDirectory() + "syncpeer-dependent-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        defer { try? FileManager.default.removeItem(atPath: temp) }
        let copy = try Self.taggedCopy(in: temp)
        let dependent = temp + "/dependent"
        try FileManager.default.createDirectory(atPath: dependent, withIntermediateDirectories: true)
        for item in ["Package.swift", "Sources"] {
            try FileManager.default.copyItem(atPath: InstallTests.repository.path + "/examples/dependent/" + item, toPath: dependent + "/" + item)
        }
        let planned = try InstallTests.run(Self.swift, [
            "build", "--package-path", dependent, "--scratch-path", dependent + "/.build", "--cache-path", temp + "/cache",
            "--product", "dependent", "--print-manifest-job-graph",
        ], environment: ["SYNCPEER_PACKAGE_URL": "file://" + copy])
        #expect(planned.status == 0, "\(planned.output)")
        #expect(!planned.output.contains("unsafe build flags"), "\(planned.output)")
        // Resolved by version, not by branch or path.
        let resolved = try String(contentsOfFile: dependent + "/Package.resolved", encoding: .utf8)
        #expect(resolved.contains("\"version\" : \"0.1.0\""), "\(resolved)")
    }
}
