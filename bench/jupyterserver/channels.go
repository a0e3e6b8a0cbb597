package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/websocket"
)

// channels is a kernel's channels WebSocket in jupyter_server (its JSON
// message protocol), the path a frontend, or E2B's interpreter, uses.
type channels struct {
	ws      *websocket.Conn
	session string
}

func randomID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// openKernel starts forkbox's IPython kernel in the server and connects
// to its channels.
func (s *server) openKernel(ctx context.Context) (*channels, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/api/kernels",
		strings.NewReader(`{"name":"forkbox-python"}`))
	req.Header.Set("Authorization", "token "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var k struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&k); err != nil || k.ID == "" {
		return nil, fmt.Errorf("POST /api/kernels: %s (%v)", resp.Status, err)
	}
	url := strings.Replace(s.base, "http://", "ws://", 1) + "/api/kernels/" + k.ID + "/channels?token=" + s.token
	ws, err := websocket.Dial(url, "", s.base)
	if err != nil {
		return nil, fmt.Errorf("channels WebSocket: %w", err)
	}
	return &channels{ws: ws, session: randomID()}, nil
}

func (c *channels) Close() error { return c.ws.Close() }

// execute sends an execute_request and reads until the kernel is idle
// again and has replied, as the code interpreter's own client does.
func (c *channels) execute(code string) error {
	id := randomID()
	msg := map[string]any{
		"header": map[string]string{"msg_id": id, "msg_type": "execute_request", "session": c.session,
			"username": "bench", "version": "5.3", "date": time.Now().UTC().Format(time.RFC3339Nano)},
		"parent_header": map[string]any{}, "metadata": map[string]any{}, "channel": "shell", "buffers": []any{},
		"content": map[string]any{"code": code, "silent": false, "store_history": true,
			"user_expressions": map[string]any{}, "allow_stdin": false},
	}
	if err := websocket.JSON.Send(c.ws, msg); err != nil {
		return err
	}
	idle, replied := false, false
	c.ws.SetReadDeadline(time.Now().Add(time.Minute))
	for !idle || !replied {
		var raw []byte
		if err := websocket.Message.Receive(c.ws, &raw); err != nil {
			return err
		}
		var m struct {
			Parent struct {
				MsgID string `json:"msg_id"`
			} `json:"parent_header"`
			MsgType string `json:"msg_type"`
			Content struct {
				State string `json:"execution_state"`
			} `json:"content"`
		}
		if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&m); err != nil {
			return fmt.Errorf("message %q: %w", raw, err)
		}
		if m.Parent.MsgID != id {
			continue
		}
		switch {
		case m.MsgType == "execute_reply":
			replied = true
		case m.MsgType == "status" && m.Content.State == "idle":
			idle = true
		}
	}
	return nil
}
