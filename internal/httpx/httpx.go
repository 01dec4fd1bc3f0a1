// Package httpx holds the JSON request and response conventions both planes
// share: capped bodies, strict decoding, and the {"error","message"} shape.
package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// WriteJSON writes v as the JSON body of a response with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":"internal","message":"response encoding failed"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// Error is the body of every error response.
type Error struct {
	Code    string `json:"error"`
	Message string `json:"message"`
}

// WriteError writes {"error": code, "message": message} with status.
func WriteError(w http.ResponseWriter, status int, code, message string) {
	WriteJSON(w, status, Error{Code: code, Message: message})
}

// BodyError is returned by DecodeJSON; its text is safe to show a client.
type BodyError struct {
	Status int    // 400 or 413
	Code   string // "invalid_json" or "body_too_large"
	Msg    string
}

func (e *BodyError) Error() string { return e.Msg }

// DecodeJSON decodes the request body into v. The body is capped at maxBytes
// (413 beyond it); unknown fields, duplicate keys, keys that match a field
// only case-insensitively and trailing data are rejected (see CheckKeys);
// and the error, a *BodyError, never quotes the body back.
func DecodeJSON(w http.ResponseWriter, r *http.Request, maxBytes int64, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
	if err != nil {
		return bodyError(err, maxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err, maxBytes)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &BodyError{http.StatusBadRequest, "invalid_json", "request body has data after the JSON value"}
	}
	if err := CheckKeys(body, v); err != nil {
		return &BodyError{http.StatusBadRequest, "invalid_json", "request body has a " + err.Error()}
	}
	return nil
}

func bodyError(err error, maxBytes int64) *BodyError {
	var tooBig *http.MaxBytesError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		return &BodyError{http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("request body exceeds %d bytes", maxBytes)}
	case errors.Is(err, io.EOF):
		return &BodyError{http.StatusBadRequest, "invalid_json", "request body is empty"}
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return &BodyError{http.StatusBadRequest, "invalid_json", "request body is not valid JSON"}
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return &BodyError{http.StatusBadRequest, "invalid_json", "request body must be a JSON object"}
		}
		return &BodyError{http.StatusBadRequest, "invalid_json", fmt.Sprintf("field %q must be %s", field, kind(typ.Type.Kind().String()))}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return &BodyError{http.StatusBadRequest, "invalid_json", strings.TrimPrefix(err.Error(), "json: ")}
	default:
		return &BodyError{http.StatusBadRequest, "invalid_json", "request body is not valid JSON"}
	}
}

func kind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "int", "int32", "int64", "uint", "uint32", "uint64":
		return "an integer"
	case "bool":
		return "a boolean"
	default:
		return "a " + k
	}
}

// WriteBodyError answers a DecodeJSON failure.
func WriteBodyError(w http.ResponseWriter, err error) {
	var be *BodyError
	if errors.As(err, &be) {
		WriteError(w, be.Status, be.Code, be.Msg)
		return
	}
	WriteError(w, http.StatusBadRequest, "invalid_json", "invalid request body")
}

// Bearer returns the credential of an "Authorization: Bearer <cred>" header.
func Bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	cred := strings.TrimSpace(h[len(prefix):])
	return cred, cred != ""
}

// LogPath is a request path as it may be logged: any segment that looks
// like a credential (an API key, an invite, federation or poll token, or a
// JWT, whose header always starts "eyJ") is replaced, in case a client put
// one in the path. Query strings are never logged.
func LogPath(p string) string {
	if !strings.Contains(p, "sk_") && !strings.Contains(p, "skt_") && !strings.Contains(p, "/eyJ") {
		return p
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if strings.Contains(s, "sk_") || strings.Contains(s, "skt_") || strings.HasPrefix(s, "eyJ") {
			segs[i] = "[redacted]"
		}
	}
	return strings.Join(segs, "/")
}
