package codeinterp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// fetchEnvdEnv reads the sandbox's environment variables (set through
// envd's /init) from envd's GET /envs, passing the client's access token.
func fetchEnvdEnv(ctx context.Context, baseURL, token string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+"/envs", nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("X-Access-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /envs: %s", resp.Status)
	}
	env := map[string]string{}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return nil, fmt.Errorf("GET /envs: %w", err)
	}
	return env, nil
}
