import Foundation
import Testing
@testable import SyncEngine

/// A new key may not take a paired peer's name, as Foundation's NFKC, lower case and trimmed
/// compared names (issue 42.6: the same without ICU, by UnicodeForms).
struct DeviceNameFoldTests {
    static func foundationFold(_ name: String) -> String {
        name.precomposedStringWithCompatibilityMapping.lowercased().trimmingCharacters(in: .whitespaces)
    }

    @Test(arguments: [
        ("laptop", "Laptop"), ("\u{FF2C}\u{FF41}\u{FF50}\u{FF54}\u{FF4F}\u{FF50}", "laptop"), ("\u{FB01}les", "files"),
        ("cafe\u{301}", "CAF\u{C9}"), (" desk\u{3000}", "desk"), ("\u{212B}ngstr\u{F6}m", "\u{C5}ngstro\u{308}m"),
        ("\u{2460} box", "1 box"), ("laptop", "laptop 2"), ("work", "w\u{200B}ork"), ("\u{1100}\u{1161}", "\u{AC00}"),
    ])
    func namesAreTheSameWhereFoundationSaidSo(_ pair: (String, String)) {
        let foundation = Self.foundationFold(pair.0) == Self.foundationFold(pair.1)
        #expect(ConnectionService.sameName(pair.0, pair.1) == foundation, "\(pair)")
    }
}
