package codeinterp

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// This file is the Jupyter messaging protocol's wire format (version 5.3,
// https://jupyter-client.readthedocs.io/en/stable/messaging.html): a
// message is a ZeroMQ multipart message of routing identities, the
// "<IDS|MSG>" delimiter, an HMAC-SHA256 signature and four JSON frames.

// jupyterProtocolVersion is the messaging protocol version forkbox speaks.
const jupyterProtocolVersion = "5.3"

var idsDelimiter = []byte("<IDS|MSG>")

// jHeader is a Jupyter message header.
type jHeader struct {
	MsgID    string `json:"msg_id"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	MsgType  string `json:"msg_type"`
	Version  string `json:"version"`
}

// jMessage is a decoded Jupyter message; Content stays raw so each message
// type decodes only what it needs.
type jMessage struct {
	Header       jHeader
	ParentHeader jHeader
	Content      json.RawMessage
}

// jSigner signs and verifies messages with a connection's key.
type jSigner struct {
	key []byte
}

func (s jSigner) sign(frames ...[]byte) []byte {
	if len(s.key) == 0 {
		return nil
	}
	mac := hmac.New(sha256.New, s.key)
	for _, f := range frames {
		mac.Write(f)
	}
	sum := mac.Sum(nil)
	out := make([]byte, hex.EncodedLen(len(sum)))
	hex.Encode(out, sum)
	return out
}

// encode builds the frames of a request of msgType with content.
func (s jSigner) encode(session, msgType string, content any) (id string, frames [][]byte, err error) {
	id = newID()
	h, err := json.Marshal(jHeader{
		MsgID: id, Session: session, Username: "forkbox", MsgType: msgType,
		Version: jupyterProtocolVersion, Date: time.Now().UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		return "", nil, err
	}
	c, err := json.Marshal(content)
	if err != nil {
		return "", nil, err
	}
	parent, meta := []byte("{}"), []byte("{}")
	frames = [][]byte{idsDelimiter, s.sign(h, parent, meta, c), h, parent, meta, c}
	return id, frames, nil
}

// errBadSignature marks a message whose HMAC does not match the key.
var errBadSignature = errors.New("jupyter message: bad signature")

// decode parses frames received from a kernel, checking the signature.
func (s jSigner) decode(frames [][]byte) (*jMessage, error) {
	i := 0
	for i < len(frames) && !bytes.Equal(frames[i], idsDelimiter) {
		i++
	}
	if len(frames)-i < 6 {
		return nil, fmt.Errorf("jupyter message: %d frames after the delimiter", len(frames)-i)
	}
	sig, h, parent, meta, content := frames[i+1], frames[i+2], frames[i+3], frames[i+4], frames[i+5]
	if len(s.key) > 0 && !hmac.Equal(sig, s.sign(h, parent, meta, content)) {
		return nil, errBadSignature
	}
	m := &jMessage{Content: content}
	if err := json.Unmarshal(h, &m.Header); err != nil {
		return nil, fmt.Errorf("jupyter message header: %w", err)
	}
	if err := json.Unmarshal(parent, &m.ParentHeader); err != nil {
		return nil, fmt.Errorf("jupyter message parent header: %w", err)
	}
	return m, nil
}
