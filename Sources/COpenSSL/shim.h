// OpenSSL from Debian (libssl-dev), for PeerCrypto, the only module that imports it:
// libcrypto's AES-256-GCM and SHA-256, and libssl's TLS client for the relay and global
// discovery servers (TLSClient, over memory BIOs: the socket stays PeerNet's).
#include <openssl/evp.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/err.h>

// Macros Swift cannot call, as functions.
static inline int syncpeer_ssl_ctx_min_tls13(SSL_CTX *ctx) {
    return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
}
static inline int syncpeer_ssl_ctx_min_tls12(SSL_CTX *ctx) {
    return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}
static inline int syncpeer_ssl_set_sni(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}
static inline int syncpeer_bio_pending(BIO *bio) {
    return (int)BIO_ctrl_pending(bio);
}
