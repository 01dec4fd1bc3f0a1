package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// CheckKeys reports whether the JSON text b, to be decoded into v, uses
// its object keys exactly: no object may repeat a key (encoding/json keeps
// the last one, so two parsers could read one body two ways), and a key
// must match the name of the struct field it fills byte for byte
// (encoding/json would also accept "Channel" or "CHANNEL" for "channel").
// Unknown keys are left to the decoder's DisallowUnknownFields. The error
// names the offending key, never a value.
func CheckKeys(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := checkValue(dec, reflect.TypeOf(v)); err != errMalformed {
		return err
	}
	return nil // malformed JSON is the decoder's to report
}

var errMalformed = errors.New("malformed JSON")

// checkValue walks one JSON value; t is the Go type it decodes into, or
// nil when that is not a struct we know the fields of.
func checkValue(dec *json.Decoder, t reflect.Type) error {
	tok, err := dec.Token()
	if err != nil {
		return errMalformed
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]fieldInfo
		var elem reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				fields = structFields(t)
			case reflect.Map:
				elem = t.Elem()
			}
		}
		seen := make(map[string]struct{})
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return errMalformed
			}
			key, ok := kt.(string)
			if !ok {
				return errMalformed
			}
			if _, dup := seen[key]; dup {
				return fmt.Errorf("duplicate key %q", key)
			}
			seen[key] = struct{}{}
			next := elem
			if fields != nil {
				f, exact := fields[key]
				if !exact {
					for name := range fields {
						if strings.EqualFold(name, key) {
							return fmt.Errorf("key %q must be spelled %q", key, name)
						}
					}
				}
				next = f.typ
			}
			if err := checkValue(dec, next); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // the closing brace
			return errMalformed
		}
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for dec.More() {
			if err := checkValue(dec, elem); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return errMalformed
		}
	}
	return nil
}

type fieldInfo struct{ typ reflect.Type }

var fieldCache sync.Map // reflect.Type → map[string]fieldInfo

// structFields maps the JSON names of t's fields (as encoding/json names
// them, embedded structs included) to their types.
func structFields(t reflect.Type) map[string]fieldInfo {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]fieldInfo)
	}
	m := make(map[string]fieldInfo)
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			m[name] = fieldInfo{f.Type}
		}
	}
	walk(t)
	fieldCache.Store(t, m)
	return m
}
