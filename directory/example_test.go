package directory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/skytale-oss/skytale/directory"
)

// The directory is an http.Handler: mount it on your own mux (here under
// the root) and serve it however you like.
func ExampleNew() {
	dir, err := directory.New(context.Background(), directory.Config{
		JWTSecret:  []byte("a secret shared with the relay"),
		OpenSignup: true,
	})
	if err != nil {
		panic(err)
	}
	defer dir.Close(context.Background())

	mux := http.NewServeMux()
	mux.Handle("/", dir)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/v1/accounts", "application/json",
		strings.NewReader(`{"email":"ops@acme.example","org":"acme"}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var acct struct {
		Org    string `json:"org"`
		APIKey string `json:"api_key"`
	}
	json.NewDecoder(resp.Body).Decode(&acct)
	fmt.Println(resp.StatusCode, acct.Org, strings.HasPrefix(acct.APIKey, "sk_live_"))
	// Output: 201 acme true
}
