import Testing

@Test func placeholderPeerWireTests() { #expect(Bool(true)) }
