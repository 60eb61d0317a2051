package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Client talks to the daemon's control socket.
type Client struct {
	socket string
	http   *http.Client
}

// responseTimeout bounds the wait for a response's headers. The body has
// no overall deadline (a long route list streams for as long as it takes);
// the caller's context ends the wait at any time.
const responseTimeout = 30 * time.Second

// NewClient returns a client for the unix socket at path.
func NewClient(path string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		ResponseHeaderTimeout: responseTimeout,
	}
	return &Client{socket: path, http: &http.Client{Transport: tr}}
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

// ListOptions select the items of a route list.
type ListOptions struct {
	// Peer is one peer's name; "" = every peer.
	Peer string
	// Rejected (learned routes only) keeps the paths no import rule accepts.
	Rejected bool
	// Limit stops the list after this many items; 0 = no limit.
	Limit int
}

func (o ListOptions) query() url.Values {
	q := url.Values{"peer": {o.Peer}}
	if o.Rejected {
		q.Set("rejected", "true")
	}
	if o.Limit != 0 { // a negative limit is the daemon's to refuse, not to ignore
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q
}

// Advertised returns what is advertised, to one peer or ("" ) all.
func (c *Client) Advertised(ctx context.Context, peer string) ([]Advertised, error) {
	a, _, err := c.AdvertisedRoutes(ctx, ListOptions{Peer: peer})
	return a, err
}

// AdvertisedRoutes returns what is advertised; truncated is true when the
// list stopped at o.Limit.
func (c *Client) AdvertisedRoutes(ctx context.Context, o ListOptions) (routes []Advertised, truncated bool, err error) {
	routes = []Advertised{}
	truncated, err = stream(ctx, c, PathAdvertised, o.query(), func(a Advertised) { routes = append(routes, a) })
	return routes, truncated, err
}

// Learned returns what peers sent; rejected=true returns only the paths no
// import rule accepts.
func (c *Client) Learned(ctx context.Context, peer string, rejected bool) ([]LearnedRoute, error) {
	l, _, err := c.LearnedRoutes(ctx, ListOptions{Peer: peer, Rejected: rejected})
	return l, err
}

// LearnedRoutes returns what peers sent; truncated is true when the list
// stopped at o.Limit.
func (c *Client) LearnedRoutes(ctx context.Context, o ListOptions) (routes []LearnedRoute, truncated bool, err error) {
	routes = []LearnedRoute{}
	truncated, err = stream(ctx, c, PathLearned, o.query(), func(l LearnedRoute) { routes = append(routes, l) })
	return routes, truncated, err
}

// Config returns the daemon's running config, secrets redacted, as JSON.
func (c *Client) Config(ctx context.Context) (json.RawMessage, error) {
	var raw json.RawMessage
	return raw, c.get(ctx, PathConfig, nil, &raw)
}

// maxBody bounds a non-streamed answer (status, peers, config).
const maxBody = 64 << 20

func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	resp, err := c.do(ctx, path, q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return c.explain(ctx, fmt.Errorf("read %s: %w", path, err))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// stream decodes a JSON array item by item and reads the trailers that say
// how it ended.
func stream[T any](ctx context.Context, c *Client, path string, q url.Values, each func(T)) (truncated bool, err error) {
	resp, err := c.do(ctx, path, q)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	fail := func(err error) (bool, error) {
		return false, c.explain(ctx, fmt.Errorf("read %s: %w", path, err))
	}
	if tok, err := dec.Token(); err != nil {
		return fail(err)
	} else if tok != json.Delim('[') {
		return false, fmt.Errorf("decode %s: want a JSON array, got %v", path, tok)
	}
	for dec.More() {
		var v T
		if err := dec.Decode(&v); err != nil {
			return fail(err)
		}
		each(v)
	}
	if _, err := dec.Token(); err != nil {
		return fail(err)
	}
	// Trailers arrive after the body's end.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fail(err)
	}
	if e := resp.Trailer.Get(TrailerError); e != "" {
		return false, fmt.Errorf("%s: incomplete list: %s", path, e)
	}
	return resp.Trailer.Get(TrailerTruncated) == "true", nil
}

// do sends a GET and turns a non-2xx answer into its error.
func (c *Client) do(ctx context.Context, path string, q url.Values) (*http.Response, error) {
	u := url.URL{Scheme: "http", Host: "ovnbgp", Path: path}
	for k, v := range q {
		if len(v) == 0 || v[0] == "" {
			delete(q, k)
		}
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.explain(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var e Error
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, errors.New(e.Error)
		}
		return nil, fmt.Errorf("%s: %s", path, resp.Status)
	}
	return resp, nil
}

// explain turns socket errors into advice.
func (c *Client) explain(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		// Interrupted (Ctrl-C) or timed out: say so, not "context canceled".
		return fmt.Errorf("control socket %s: %w", c.socket, context.Cause(ctx))
	case errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no ovnbgp daemon is listening on %s (is it running? set --socket or control.socket): %w", c.socket, err)
	case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.EACCES):
		return fmt.Errorf("permission denied on %s (the control socket is for root; try sudo): %w", c.socket, err)
	}
	return fmt.Errorf("control socket %s: %w", c.socket, err)
}

// Plan returns every change the daemon would make now.
func (c *Client) Plan(ctx context.Context) (PlanResponse, error) {
	var p PlanResponse
	return p, c.get(ctx, PathPlan, nil, &p)
}

// PlanConfig returns the changes the config text would make, and the
// sessions it would reset (root only); name names it in errors.
func (c *Client) PlanConfig(ctx context.Context, name string, text []byte) (PlanResponse, error) {
	var p PlanResponse
	return p, c.post(ctx, PathPlan, PlanRequest{Name: name, Text: string(text)}, &p)
}

// Reload asks the daemon to re-read its config file and apply it, as
// SIGHUP does (root only). A refused config is no error: r.Applied is
// false and r.Error says why; err is for a reload that could not be asked.
func (c *Client) Reload(ctx context.Context) (r ReloadResult, err error) {
	status, data, err := c.postRaw(ctx, PathReload, struct{}{})
	if err != nil {
		return r, err
	}
	if status == http.StatusOK || status == http.StatusUnprocessableEntity {
		if err := json.Unmarshal(data, &r); err == nil && r.Config != "" {
			return r, nil
		}
	}
	return r, replyErr(PathReload, status, data)
}

// Apply sends a saved plan (the JSON `ovnbgp plan --out` wrote) to be
// applied (root only).
func (c *Client) Apply(ctx context.Context, savedPlan json.RawMessage) (ApplyResult, error) {
	var r ApplyResult
	return r, c.post(ctx, PathApply, savedPlan, &r)
}

// Drain drains peer ("" = every peer), withdrawing after wait (root
// only).
func (c *Client) Drain(ctx context.Context, peer string, wait time.Duration) (DrainStatus, error) {
	var r DrainStatus
	return r, c.post(ctx, PathDrain, DrainRequest{Peer: peer, Wait: DrainWait(wait)}, &r)
}

// Undrain undrains peer ("" = everything) (root only).
func (c *Client) Undrain(ctx context.Context, peer string) (DrainStatus, error) {
	var r DrainStatus
	return r, c.post(ctx, PathUndrain, UndrainRequest{Peer: peer}, &r)
}

// Imported returns the imported routes, OVN and kernel ("" = every network).
func (c *Client) Imported(ctx context.Context, network string) (Imported, error) {
	var r Imported
	return r, c.get(ctx, PathImported, url.Values{"network": {network}}, &r)
}

// Explain says why prefix (or an address) is or is not imported and
// advertised.
func (c *Client) Explain(ctx context.Context, prefix string) (Explanation, error) {
	var e Explanation
	return e, c.get(ctx, PathExplain, url.Values{"prefix": {prefix}}, &e)
}

// post sends v as JSON and decodes the answer into out.
func (c *Client) post(ctx context.Context, path string, v any, out any) error {
	status, data, err := c.postRaw(ctx, path, v)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return replyErr(path, status, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// replyErr is the error of a non-2xx answer.
func replyErr(path string, status int, data []byte) error {
	var e Error
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return errors.New(e.Error)
	}
	return fmt.Errorf("%s: %d %s", path, status, http.StatusText(status))
}

// postRaw sends v as JSON and returns the answer's status and body.
func (c *Client) postRaw(ctx context.Context, path string, v any) (int, []byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return 0, nil, err
	}
	u := url.URL{Scheme: "http", Host: "ovnbgp", Path: path}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, c.explain(ctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, c.explain(ctx, fmt.Errorf("read %s: %w", path, err))
	}
	return resp.StatusCode, data, nil
}
