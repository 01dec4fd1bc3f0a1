package admin

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// Accounts is what the page does with the directory's accounts.
type Accounts interface {
	// List returns up to limit accounts in id order after the id after,
	// and the id to page on from ("" for the last page).
	List(ctx context.Context, after string, limit int) ([]Account, string, error)
	// Create makes an account and returns it with its API key, which is
	// shown once.
	Create(ctx context.Context, email, org string) (Account, string, error)
	// Disable revokes an account: its keys and tokens stop working.
	Disable(ctx context.Context, id string) error
}

// Account is one account as the page lists it.
type Account struct {
	ID         string `json:"account_id"`
	Email      string `json:"email"`
	Org        string `json:"org"`
	CreatedAt  string `json:"created_at"`
	LastSignin string `json:"last_signin"`
	Disabled   bool   `json:"disabled"`
}

// DirectoryAccounts reaches the accounts through the directory's operator
// endpoints (GET /v1/internal/accounts, POST /v1/accounts and
// POST /v1/revocations with the internal secret), handled in this process
// by the directory's handler: what the tally serve accounts commands do
// over the network.
func DirectoryAccounts(directory http.Handler, internalSecret []byte) Accounts {
	return &dirAccounts{h: directory, secret: string(internalSecret)}
}

type dirAccounts struct {
	h      http.Handler
	secret string
}

// maxAnswer bounds an answer of the directory read by Call (a page of 500
// accounts is well inside it).
const maxAnswer = 8 << 20

// APIError is a refusal of the directory, with its code and message; Code
// is "" when the answer carried no JSON error.
type APIError struct {
	Status  int
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("the directory answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("%s (%s)", e.Message, e.Code)
}

// Call sends a request to one of the directory's operator endpoints, path
// under base, with the internal secret: in (unless nil) as its JSON body.
// do sends it (an http.Client's Do, or a handler in this process); a 2xx
// answer is decoded into out (unless nil), any other is an *APIError. The
// operator's commands and the admin page both reach the directory so.
func Call(ctx context.Context, do func(*http.Request) (*http.Response, error), base, secret, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return err
	}
	if len(b) > maxAnswer {
		return fmt.Errorf("the directory's answer to %s %s is over %d bytes", method, path, maxAnswer)
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Status: resp.StatusCode}
		if json.Unmarshal(b, e) != nil {
			e.Code, e.Message = "", ""
		}
		return e
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// call sends a request to the directory's handler in this process.
func (d *dirAccounts) call(ctx context.Context, method, path string, in, out any) error {
	err := Call(ctx, d.serve, "http://directory", d.secret, method, path, in, out)
	if e, ok := err.(*APIError); ok && e.Code == "" {
		e.Code, e.Message = "internal", e.Error()
	}
	return err
}

// serve answers req with the directory's handler, as if it came over
// loopback.
func (d *dirAccounts) serve(req *http.Request) (*http.Response, error) {
	req.RemoteAddr = "127.0.0.1:0"
	rec := &recorder{header: http.Header{}}
	d.h.ServeHTTP(rec, req)
	if rec.over {
		return nil, fmt.Errorf("the directory's answer to %s %s is over %d bytes", req.Method, req.URL.Path, maxAnswer)
	}
	return &http.Response{StatusCode: cmp.Or(rec.code, http.StatusOK), Header: rec.header, Body: io.NopCloser(&rec.body)}, nil
}

func (d *dirAccounts) List(ctx context.Context, after string, limit int) ([]Account, string, error) {
	var page struct {
		Accounts []Account `json:"accounts"`
		HasMore  bool      `json:"has_more"`
		Next     string    `json:"next"`
	}
	q := url.Values{"after": {after}, "limit": {strconv.Itoa(limit)}}
	if err := d.call(ctx, "GET", "/v1/internal/accounts?"+q.Encode(), nil, &page); err != nil {
		return nil, "", err
	}
	if !page.HasMore {
		page.Next = ""
	}
	return page.Accounts, page.Next, nil
}

func (d *dirAccounts) Create(ctx context.Context, email, org string) (Account, string, error) {
	var out struct {
		AccountID string `json:"account_id"`
		Org       string `json:"org"`
		APIKey    string `json:"api_key"`
	}
	if err := d.call(ctx, "POST", "/v1/accounts", map[string]string{"email": email, "org": org}, &out); err != nil {
		return Account{}, "", err
	}
	return Account{ID: out.AccountID, Email: email, Org: out.Org}, out.APIKey, nil
}

func (d *dirAccounts) Disable(ctx context.Context, id string) error {
	return d.call(ctx, "POST", "/v1/revocations", map[string]string{"did": "did:skytale:" + id}, nil)
}

// recorder is the response of an in-process request, its body bounded.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
	over   bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if r.body.Len()+len(b) > maxAnswer {
		r.over = true
		return 0, fmt.Errorf("answer over %d bytes", maxAnswer)
	}
	return r.body.Write(b)
}
