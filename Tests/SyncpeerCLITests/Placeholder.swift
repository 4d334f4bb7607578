import Testing

@Test func placeholderSyncpeerCLITests() { #expect(Bool(true)) }
