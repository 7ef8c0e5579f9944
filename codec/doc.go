// Package codec transforms payloads on their way to the database and back:
// compression (zstd) and encryption (AES-256-GCM with key ids and
// rotation), and any custom transformation that implements Codec.
//
// A Chain applies its codecs in order on encode and in reverse on decode.
// Payloads are JSON values stored in JSON columns, so an encoded payload
// is itself a JSON value: an envelope object
//
//	{"$heph":"enc/1","codecs":["zstd","aes-gcm"],"key":"k2","size":1843,"data":"<base64>"}
//
// whose members are
//
//   - "$heph": the format, "enc/1". A JSON object with a top-level
//     member written exactly "$heph" whose value is a string starting with
//     "enc/" is an envelope (IsEncoded); anything else is a plain value.
//   - "codecs": the names of the codecs applied, in the order applied.
//     Codecs that declined (compression of a small payload) are absent.
//   - "key": the id of the key the payload was encrypted with; absent when
//     no codec used a key.
//   - "size": the size in bytes of the plain JSON value.
//   - "data": the encoded bytes, in standard base64 with padding.
//
// DecodeJSON returns a plain value unchanged, so rows written before
// encoding was turned on stay readable. EncodeJSON of a plain value that
// would read as an envelope wraps it in an envelope with no codecs, so
// every value round-trips.
//
// An authenticating codec (AESGCM) binds the format, the size, the key id
// and the codecs applied up to and including itself as additional data
// (Step.AdditionalData): altering any of them, or a byte of data, fails
// the decryption with ErrDecrypt.
//
// Keys: a Keyring holds 32-byte keys by id, all of them for reading and
// one for writing. KeyringFromEnv reads them from HEPH_PAYLOAD_KEYS,
// HEPH_PAYLOAD_KEY_DIR, HEPH_PAYLOAD_KEY_FILES and HEPH_PAYLOAD_WRITE_KEY;
// ParseKeys, ReadKeyFile and ReadKeyDir read the same forms. Chain.Reencode
// moves a payload to the chain's current write key.
//
// docs/payloads.md describes the format, the configuration and the limits.
package codec
