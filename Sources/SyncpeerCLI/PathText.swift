/// How a live session reaches a peer, as `peers` and `status` print it: "direct HOST:PORT"
/// or "relay HOST", then the last measured round trip ("rtt 12 ms"; tenths below 10 ms).
enum PathText {
    static func describe(path: String?, roundTripMs: Double?) -> String? {
        guard let path else { return nil }
        guard let roundTripMs, roundTripMs >= 0, roundTripMs.isFinite else { return path }
        let rtt = roundTripMs < 10 ? String(Double(Int(roundTripMs * 10)) / 10) : String(Int(roundTripMs.rounded()))
        return "\(path)  rtt \(rtt) ms"
    }
}
