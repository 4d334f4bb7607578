/// A Noise `SymmetricState` (spec section 5.2): the chaining key, the handshake hash and
/// the handshake's cipher state.
///
/// Confined to one task, like the handshake state that owns it.
package final class NoiseSymmetricState {
    /// The cipher state used for handshake payloads and static keys.
    package let cipherState: NoiseCipherState
    /// The hash function (HASH, HMAC-HASH, HKDF).
    package let hashFunction: NoiseHashFunction
    /// `ck`: secret, so it lives in wiped memory.
    private var chainingKey: SecureBytes
    /// `h`: not secret (it is the transcript hash), HASHLEN bytes.
    private var hash: [UInt8]

    /// `InitializeSymmetric(protocol_name)`: names up to HASHLEN bytes are zero-padded,
    /// longer ones hashed, so `h` always starts as HASHLEN bytes.
    package init(protocolName: String, cipher: NoiseCipherFunction = .chaChaPoly, hash hashFunction: NoiseHashFunction = .blake2b) {
        cipherState = NoiseCipherState(cipher)
        self.hashFunction = hashFunction
        let name = Array(protocolName.utf8)
        let hashLength = hashFunction.hashLength
        if name.count <= hashLength {
            hash = name + [UInt8](repeating: 0, count: hashLength - name.count)
        } else {
            hash = hashFunction.hash(parts: [name])
        }
        chainingKey = SecureBytes(hash)
    }

    /// `MixKey(input_key_material)`: derives a new chaining key and cipher key (the first
    /// 32 bytes of the second output when HASHLEN is 64).
    package func mixKey(_ inputKeyMaterial: some ContiguousBytes) {
        let outputs = NoiseHMAC.hkdf(hashFunction, chainingKey: chainingKey, inputKeyMaterial: inputKeyMaterial, outputs: 2)
        chainingKey = outputs[0]
        try! cipherState.initializeKey(truncatedKey(outputs[1]))  // always 32 bytes
    }

    /// `MixHash(data)`: h = HASH(h || data).
    package func mixHash(_ data: some ContiguousBytes) {
        hash = hashFunction.hash(parts: [hash, data])
    }

    /// `MixKeyAndHash(input_key_material)`: for `psk` tokens; mixes into both ck and h.
    package func mixKeyAndHash(_ inputKeyMaterial: some ContiguousBytes) {
        let outputs = NoiseHMAC.hkdf(hashFunction, chainingKey: chainingKey, inputKeyMaterial: inputKeyMaterial, outputs: 3)
        chainingKey = outputs[0]
        mixHash(outputs[1])
        try! cipherState.initializeKey(truncatedKey(outputs[2]))  // always 32 bytes
    }

    /// `GetHandshakeHash()`: the transcript hash so far (final once the handshake is done).
    package var handshakeHash: [UInt8] { hash }

    /// `EncryptAndHash(plaintext)`: encrypts with h as associated data (binding the
    /// ciphertext to the whole transcript), then mixes the ciphertext into h.
    package func encryptAndHash(_ plaintext: some ContiguousBytes) throws(CryptoError) -> [UInt8] {
        let ciphertext = try cipherState.encryptWithAd(hash, plaintext: plaintext)
        mixHash(ciphertext)
        return ciphertext
    }

    /// `DecryptAndHash(ciphertext)`: the inverse of `encryptAndHash`.
    package func decryptAndHash(_ ciphertext: some ContiguousBytes) throws(CryptoError) -> [UInt8] {
        let plaintext = try cipherState.decryptWithAd(hash, ciphertext: ciphertext)
        mixHash(ciphertext)
        return plaintext
    }

    /// `Split()`: the two transport cipher states, initiator→responder first.
    package func split() -> (initiatorToResponder: NoiseCipherState, responderToInitiator: NoiseCipherState) {
        let outputs = NoiseHMAC.hkdf(hashFunction, chainingKey: chainingKey, inputKeyMaterial: [UInt8](), outputs: 2)
        // Keys are always 32 bytes here, so the throwing initialiser cannot fail.
        let c1 = try! NoiseCipherState(cipherState.function, key: truncatedKey(outputs[0]))
        let c2 = try! NoiseCipherState(cipherState.function, key: truncatedKey(outputs[1]))
        return (c1, c2)
    }

    private func truncatedKey(_ output: SecureBytes) -> SecureBytes {
        output.withUnsafeBytes { full in
            SecureBytes(count: NoiseCipherFunction.keyLength) { out in
                out.copyMemory(from: UnsafeRawBufferPointer(rebasing: full[0..<NoiseCipherFunction.keyLength]))
            }
        }
    }
}
