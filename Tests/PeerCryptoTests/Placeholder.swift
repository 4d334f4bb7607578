import Testing

@Test func placeholderPeerCryptoTests() { #expect(Bool(true)) }
