import Foundation
import Testing

/// Issue 42.6: no module linked into `syncpeer` imports Foundation, so the binary carries
/// neither swift-corelibs-foundation nor ICU (whose data was 34 of the stripped release
/// binary's 65 MB); FoundationEssentials, which needs no ICU, is all it links.
struct BinaryLinksTests {
    @Test func theBinaryLinksNeitherFoundationNorICU() throws {
        // A debug build links Swift's libraries as shared objects: they are named here.
        let linked = try SyncpeerRunner.runProgram("/usr/bin/ldd", [SyncpeerRunner.binary])
        try #require(linked.status == 0, "\(linked.stderr)")
        for library in ["libFoundation.so", "libFoundationInternationalization.so", "lib_FoundationICU.so"] {
            #expect(!linked.stdout.contains(library), "syncpeer links \(library):\n\(linked.stdout)")
        }
        // A static build holds ICU's data itself, named "icudtNN" inside.
        let icuData = try SyncpeerRunner.runProgram("/usr/bin/grep", ["-c", "-a", "icudt", SyncpeerRunner.binary])
        #expect(icuData.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "syncpeer holds ICU's data")
    }
}
