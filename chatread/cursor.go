package chatread

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// A cursor is opaque (its position is sealed), tamper-evident, bound to the
// request it continues (asker, operation, target or query) and dated so it
// expires (Config.CursorTTL). Layout, base64url without padding, with encKey
// and macKey derived from the deployment's key by HMAC-SHA256 over two labels:
//
//	"c1" | nonce (16) | AES-256-CTR(encKey, nonce, payload) | HMAC-SHA256(macKey, "c1" | nonce | ciphertext)

const (
	cursorVersion = "c1"
	nonceBytes    = 16
	tagBytes      = sha256.Size
	// MinKeyBytes is the shortest deployment key accepted.
	MinKeyBytes = 32
)

// ErrBadCursor: not a cursor this deployment gave for this request.
var ErrBadCursor = errors.New("the cursor is not one this deployment gave for this request")

// position is what a cursor carries: the request and where its next page starts.
type position struct {
	Op     string `json:"o"`
	Asker  Chat   `json:"a"`
	Target Chat   `json:"t"`
	Query  string `json:"q,omitempty"`
	Next   int64  `json:"n"` // items already given
	Born   int64  `json:"b"` // the target's header time: a chat made again is not continued
	Issued int64  `json:"i"` // Unix seconds: the cursor expires Config.CursorTTL later
}

type sealer struct {
	enc cipher.Block
	mac []byte
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("the chat reading key is %d bytes; it needs at least %d", len(key), MinKeyBytes)
	}
	derive := func(label string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte("convkit chatread " + label))
		return h.Sum(nil)
	}
	block, err := aes.NewCipher(derive("cursor encryption v1"))
	if err != nil {
		return nil, err
	}
	return &sealer{enc: block, mac: derive("cursor authentication v1")}, nil
}

func (s *sealer) tag(nonce, ct []byte) []byte {
	h := hmac.New(sha256.New, s.mac)
	h.Write([]byte(cursorVersion))
	h.Write(nonce)
	h.Write(ct)
	return h.Sum(nil)
}

// seal makes the cursor of p.
func (s *sealer) seal(p position) (string, error) {
	plain, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, nonceBytes)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	ct := make([]byte, len(plain))
	cipher.NewCTR(s.enc, nonce).XORKeyStream(ct, plain)
	b := append([]byte(cursorVersion), nonce...)
	b = append(b, ct...)
	b = append(b, s.tag(nonce, ct)...)
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// open reads a cursor back; any change to it is ErrBadCursor.
func (s *sealer) open(cursor string) (position, error) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) < len(cursorVersion)+nonceBytes+tagBytes+1 || string(b[:len(cursorVersion)]) != cursorVersion {
		return position{}, ErrBadCursor
	}
	b = b[len(cursorVersion):]
	nonce, ct, tag := b[:nonceBytes], b[nonceBytes:len(b)-tagBytes], b[len(b)-tagBytes:]
	if !hmac.Equal(tag, s.tag(nonce, ct)) {
		return position{}, ErrBadCursor
	}
	plain := make([]byte, len(ct))
	cipher.NewCTR(s.enc, nonce).XORKeyStream(plain, ct)
	var p position
	if json.Unmarshal(plain, &p) != nil || p.Next < 0 {
		return position{}, ErrBadCursor
	}
	return p, nil
}
