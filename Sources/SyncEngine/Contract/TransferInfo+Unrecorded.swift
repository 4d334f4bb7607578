internal import FoundationEssentials

extension TransferInfo {
    /// A transfer no daemon records (a Magic Wormhole transfer run by the CLI itself): no ID,
    /// no paired peer, stamped now.
    package static func unrecorded(direction: Direction, name: String, state: TransferState, bytes: Int64? = nil,
                                  total: Int64? = nil, rate: Double? = nil, eta: Double? = nil, path: String? = nil,
                                  reason: String? = nil, resumed: Int64? = nil) -> TransferInfo {
        TransferInfo(transfer: nil, direction: direction, peer: nil, name: name, state: state, bytes: bytes, total: total,
                     rate: rate, eta: eta, path: path, resumed: resumed, reason: reason, time: Int64(Date().timeIntervalSince1970 * 1000))
    }
}
