extension Frame {
    /// Decodes a frame body whose length the caller has already checked against
    /// ``WireLimits/bodyLengthRange(of:)``. Every byte of the body must be used.
    static func decodeBody(type: FrameType, from reader: inout ByteReader) throws(WireError) -> Frame {
        let frame: Frame
        switch type {
        case .ping:
            frame = .ping(try reader.u64("ping nonce"))
        case .pong:
            frame = .pong(try reader.u64("pong nonce"))
        case .close:
            let code = CloseCode(rawValue: try reader.u16("close code"))
            let reason = try reader.prefixedText(.u16, rule: .closeReason, "close reason")
            frame = .close(code: code, reason: reason)
        case .pairing:
            let raw = try reader.u8("pairing status")
            guard let status = PairingStatus(rawValue: raw) else {
                throw .invalidValue(field: "pairing status", value: UInt64(raw))
            }
            frame = .pairing(status)
        case .message:
            let id = try reader.u64("message id")
            let body = try reader.prefixedBytes(.u32, limit: WireLimits.maxMessageBody, "message body")
            frame = .message(id: id, body: body)
        case .streamOpen:
            let id = try reader.u32("stream id")
            let name = try reader.prefixedText(.u8, rule: .streamName, "stream name")
            frame = .streamOpen(id: id, name: name)
        case .streamData:
            let id = try reader.u32("stream id")
            let bytes = try reader.prefixedBytes(.u32, limit: WireLimits.maxStreamData, "stream data")
            frame = .streamData(id: id, bytes: bytes)
        case .streamClose:
            frame = .streamClose(id: try reader.u32("stream id"))
        }
        try reader.expectEnd(after: "\(type) frame body")
        return frame
    }
}
