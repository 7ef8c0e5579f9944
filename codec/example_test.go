package codec_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hephaestus-go/hephaestus/codec"
)

func Example() {
	// Keys come from the environment (KeyringFromEnv) or files
	// (ReadKeyDir); here, inline.
	k1 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("1", codec.KeySize)))
	keys, err := codec.ParseKeys("example", "k1:"+k1)
	if err != nil {
		panic(err)
	}
	ring, err := codec.NewKeyring(&codec.KeyringConfig{Keys: keys, WriteKey: "k1"})
	if err != nil {
		panic(err)
	}
	zstd, err := codec.NewZstd(nil) // compress from 1 KiB
	if err != nil {
		panic(err)
	}
	aes, err := codec.NewAESGCM(ring)
	if err != nil {
		panic(err)
	}
	chain, err := codec.NewChain(&codec.ChainConfig{Codecs: []codec.Codec{zstd, aes}})
	if err != nil {
		panic(err)
	}

	stored, err := chain.EncodeJSON(json.RawMessage(`{"card":"4242 4242 4242 4242"}`))
	if err != nil {
		panic(err)
	}
	info, _ := codec.Describe(stored)
	fmt.Println(codec.IsEncoded(stored), info.Codecs, info.Key, info.Size)

	plain, err := chain.DecodeJSON(stored)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(plain))

	// Rows written before encryption was turned on read as they are.
	old, _ := chain.DecodeJSON(json.RawMessage(`{"card":"old"}`))
	fmt.Println(string(old))
	// Output:
	// true [aes-gcm] k1 30
	// {"card":"4242 4242 4242 4242"}
	// {"card":"old"}
}
