// OpenSSL libcrypto (Debian libssl-dev): AES-256-GCM and SHA-256 for PeerCrypto, the only
// module that imports it (libssl, the TLS part, is not used).
#include <openssl/evp.h>
#include <openssl/crypto.h>
