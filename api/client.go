package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"time"
)

// Client talks to the daemon's control socket.
type Client struct {
	socket string
	http   *http.Client
}

// NewClient returns a client for the unix socket at path.
func NewClient(path string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}
	return &Client{socket: path, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// Status returns the daemon's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	return s, c.get(ctx, PathStatus, nil, &s)
}

// Peers returns every configured peer's state.
func (c *Client) Peers(ctx context.Context) ([]Peer, error) {
	var p []Peer
	return p, c.get(ctx, PathPeers, nil, &p)
}

// Advertised returns what is advertised, to one peer or ("" ) all.
func (c *Client) Advertised(ctx context.Context, peer string) ([]Advertised, error) {
	var a []Advertised
	return a, c.get(ctx, PathAdvertised, url.Values{"peer": {peer}}, &a)
}

// Learned returns what peers sent; rejected=true returns only the paths no
// import rule accepts.
func (c *Client) Learned(ctx context.Context, peer string, rejected bool) ([]LearnedRoute, error) {
	q := url.Values{"peer": {peer}}
	if rejected {
		q.Set("rejected", "true")
	}
	var l []LearnedRoute
	return l, c.get(ctx, PathLearned, q, &l)
}

// Config returns the daemon's running config, secrets redacted, as JSON.
func (c *Client) Config(ctx context.Context) (json.RawMessage, error) {
	var raw json.RawMessage
	return raw, c.get(ctx, PathConfig, nil, &raw)
}

func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	u := url.URL{Scheme: "http", Host: "ovnbgp", Path: path}
	for k, v := range q {
		if len(v) == 0 || v[0] == "" {
			delete(q, k)
		}
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.explain(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e Error
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// explain turns socket errors into advice.
func (c *Client) explain(err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no ovnbgp daemon is listening on %s (is it running? set --socket or control.socket): %w", c.socket, err)
	case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.EACCES):
		return fmt.Errorf("permission denied on %s (the control socket is for root; try sudo): %w", c.socket, err)
	}
	return fmt.Errorf("control socket %s: %w", c.socket, err)
}
