import Foundation
import Testing
@testable import SyncpeerCLI

/// `restore --at TIME` reads times as it did with Foundation's ISO8601DateFormatter and an
/// en_US_POSIX DateFormatter in the local time zone (issue 42.6: the binary has neither).
struct RestoreTimeTests {
    /// The parsing this replaced, kept here as the judge.
    static func foundationParse(_ text: String, now: Date) -> Int64? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
        if let unit = text.last.flatMap({ units[$0] }), let n = Double(text.dropLast()), n >= 0 {
            return Int64((now.timeIntervalSince1970 - n * unit) * 1000)
        }
        if let date = ISO8601DateFormatter().date(from: text) { return Int64(date.timeIntervalSince1970 * 1000) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone.current
        for format in ["yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd HH:mm", "yyyy-MM-dd'T'HH:mm:ss", "yyyy-MM-dd"] {
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return Int64(date.timeIntervalSince1970 * 1000) }
        }
        return nil
    }

    /// The last four are a spring-forward gap and a fall-back overlap in New York and Berlin
    /// (run with TZ=America/New_York or TZ=Europe/Berlin to see them matter).
    @Test(arguments: [
        "2024-03-05 14:30:15", "2024-03-05 14:30", "2024-03-05T14:30:15", "2024-03-05", "2024-12-31 23:59:59",
        "2024-03-05T14:30:15Z", "2024-03-05T14:30:15+02:00", "2024-03-05T14:30:15-0530", "90s", "5m", "2h", "1.5d",
        "2024-13-05", "2024-02-30", "2024-03-05 25:00", "2024-03-05T14:30", "yesterday", "", "2024-03-05 14:30:15 extra",
        "2024-03-10 02:30", "2024-11-03 01:30", "2024-03-31 02:30:00", "2024-10-27 02:30:00",
    ])
    func timesReadAsFoundationReadThem(_ text: String) {
        let now = Date(timeIntervalSince1970: 1_733_000_000)
        #expect(RestoreCommand.parseTime(text, now: now) == Self.foundationParse(text, now: now))
    }
}
