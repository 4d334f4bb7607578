/// The 1-byte type code at the start of every frame header (see ``Frame`` for the table).
package enum FrameType: UInt8, CaseIterable, Sendable, CustomStringConvertible {
    // 0x00–0x0F: connection control.
    case ping = 0x01
    case pong = 0x02
    case close = 0x03
    /// The sender's TLS certificate for relays and global discovery (feature `tls-certificate`).
    case certificate = 0x04
    // 0x10–0x1F: pairing.
    case pairing = 0x10
    // 0x20–0x2F: reliable messages.
    case message = 0x20
    // 0x30–0x3F: named byte streams.
    case streamOpen = 0x30
    case streamData = 0x31
    case streamClose = 0x32
    case streamCredit = 0x33
    case streamReset = 0x34
    // 0x40–0x4F: resources (transfers).
    case offer = 0x40
    case accept = 0x41
    case decline = 0x42
    case cancel = 0x43
    case done = 0x44
    case resent = 0x45
    // 0x50–0x5F: chunks.
    case chunk = 0x50
    case chunkAck = 0x51
    case hashedChunk = 0x52
    // 0x60–0x6F: shared folders.
    case shareOffer = 0x60
    case shareAnswer = 0x61
    case indexUpdate = 0x62
    case indexAck = 0x63
    case blockRequest = 0x64
    case blockResponse = 0x65
    case blockDeltaRequest = 0x66
    case indexBlocks = 0x67
    case versionRequest = 0x68
    case versionResponse = 0x69
    /// The subtrees of a folder the sender holds (feature `selection`).
    case folderSelection = 0x6A
    case chunkHave = 0x6B
    /// Chunks of a file the sender is hashing now (feature `growing-files`).
    case growingFile = 0x6C

    package var description: String {
        switch self {
        case .ping: "ping"
        case .pong: "pong"
        case .close: "close"
        case .certificate: "certificate"
        case .pairing: "pairing"
        case .message: "message"
        case .streamOpen: "stream-open"
        case .streamData: "stream-data"
        case .streamClose: "stream-close"
        case .streamCredit: "stream-credit"
        case .streamReset: "stream-reset"
        case .offer: "offer"
        case .accept: "accept"
        case .decline: "decline"
        case .cancel: "cancel"
        case .done: "done"
        case .resent: "resent"
        case .chunk: "chunk"
        case .chunkAck: "chunk-ack"
        case .hashedChunk: "hashed-chunk"
        case .shareOffer: "share-offer"
        case .shareAnswer: "share-answer"
        case .indexUpdate: "index-update"
        case .indexAck: "index-ack"
        case .blockRequest: "block-request"
        case .blockResponse: "block-response"
        case .blockDeltaRequest: "block-delta-request"
        case .indexBlocks: "index-blocks"
        case .versionRequest: "version-request"
        case .versionResponse: "version-response"
        case .folderSelection: "folder-selection"
        case .chunkHave: "chunk-have"
        case .growingFile: "growing-file"
        }
    }
}
