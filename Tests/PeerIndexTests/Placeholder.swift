import Testing

@Test func placeholderPeerIndexTests() { #expect(Bool(true)) }
