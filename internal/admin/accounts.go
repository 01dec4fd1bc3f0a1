package admin

import (
	"bytes"
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

// maxAnswer bounds an answer of the directory read here (a page of 500
// accounts is well inside it).
const maxAnswer = 4 << 20

// APIError is a refusal of the directory, with its code and message.
type APIError struct {
	Status  int
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *APIError) Error() string { return fmt.Sprintf("%s (%s)", e.Message, e.Code) }

func (d *dirAccounts) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://directory"+path, body)
	if err != nil {
		return err
	}
	req.RemoteAddr = "127.0.0.1:0"
	req.Header.Set("Authorization", "Bearer "+d.secret)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &recorder{header: http.Header{}}
	d.h.ServeHTTP(rec, req)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	if rec.over {
		return fmt.Errorf("the directory's answer to %s %s is over %d bytes", method, path, maxAnswer)
	}
	if rec.code/100 != 2 {
		e := &APIError{Status: rec.code}
		if json.Unmarshal(rec.body.Bytes(), e) != nil || e.Code == "" {
			e.Code, e.Message = "internal", "the directory answered "+strconv.Itoa(rec.code)
		}
		return e
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(rec.body.Bytes(), out)
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
