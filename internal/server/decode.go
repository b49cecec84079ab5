package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/contextinfinity/ctxinf/messages"
)

// decode reads the JSON object of a request whose body is required into
// v. Unknown fields, a value that is not an object, and data after it are
// refused; every error names the field (or "body") and what it wants, in
// the API's words.
func decode(r *http.Request, v any) error {
	return decodeBody(r.Body, v, false, false)
}

// decodeOptional is decode for a route whose fields are all optional: an
// empty body is taken as {}.
func decodeOptional(r *http.Request, v any) error {
	return decodeBody(r.Body, v, true, false)
}

// decodeBody reads one JSON object from body into v; an empty body is {}
// when emptyOK, and fields v lacks are ignored when allowUnknown (an
// OpenAI API request, of which the proxy reads a part).
func decodeBody(body io.Reader, v any, emptyOK, allowUnknown bool) error {
	br := bufio.NewReader(body)
	first, err := firstByte(br)
	switch {
	case errors.Is(err, io.EOF) && emptyOK:
		return nil
	case errors.Is(err, io.EOF):
		return invalid("body: required: a JSON object")
	case err != nil:
		return bodyError(err)
	case first != '{':
		return invalid("body: want a JSON object, got %s", jsonStart(first))
	}
	dec := json.NewDecoder(br)
	if !allowUnknown {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return jsonError(err, v)
	}
	// One object, and nothing after it but white space.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var ae *apiError
		var mbe *http.MaxBytesError
		if errors.As(err, &ae) || errors.As(err, &mbe) {
			return err
		}
		return invalid("body: unexpected data after the JSON object (at byte %d)", dec.InputOffset())
	}
	return nil
}

// firstByte returns the first byte of br that is not JSON white space,
// leaving it unread.
func firstByte(br *bufio.Reader) (byte, error) {
	for {
		c, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c, br.UnreadByte()
	}
}

// jsonStart names the JSON value that starts with c.
func jsonStart(c byte) string {
	switch {
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	}
	return strconv.QuoteRune(rune(c)) + ", which is not JSON"
}

// bodyError is the error of a body that could not be read: a timeout
// or a size over the limit as they are (classify answers them), anything
// else as a bad body.
func bodyError(err error) error {
	var ae *apiError
	var mbe *http.MaxBytesError
	if errors.As(err, &ae) || errors.As(err, &mbe) {
		return err
	}
	return invalid("body: could not be read: %s", apiMessage(err))
}

// jsonError translates an error of encoding/json decoding into v into
// the API's words: the field, what it wants, and where.
func jsonError(err error, v any) error {
	var ute *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &ute):
		field := fieldPath(ute.Field)
		if field == "" {
			field = "body"
		}
		return invalid("%s: want %s, got %s (at byte %d)", field, typeWords(ute.Type), valueWords(ute.Value), ute.Offset)
	case errors.As(err, &se):
		return invalid("body: not valid JSON at byte %d: %s", se.Offset, se.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("body: the JSON object ends early")
	}
	// encoding/json has no type for an unknown field, only this text.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, _ = strconv.Unquote(name)
		return invalid("%s: unknown field; the fields are %s", name, strings.Join(jsonFieldNames(v), ", "))
	}
	var ae *apiError
	var mbe *http.MaxBytesError
	if errors.As(err, &ae) || errors.As(err, &mbe) {
		return err
	}
	// A field's own decoder refused its value (an id, a role).
	return invalid("body: %s", apiMessage(err))
}

// jsonProblem is the message of jsonError: what is wrong with a JSON
// value decoded into v, in the API's words, for a caller that says where
// the value was (a line of an import).
func jsonProblem(err error, v any) string {
	return strings.TrimPrefix(classify(jsonError(err, v)).Message, "body: ")
}

// fieldPath writes encoding/json's path of a field ("chunks.0") as the
// API does ("chunks[0]").
func fieldPath(p string) string {
	if p == "" {
		return ""
	}
	var b strings.Builder
	for i, part := range strings.Split(p, ".") {
		if _, err := strconv.Atoi(part); err == nil {
			b.WriteString("[" + part + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(part)
	}
	return b.String()
}

// typeWords says what JSON a Go type takes.
func typeWords(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[interface{ UnmarshalText([]byte) error }]()) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	}
	return "another value"
}

// valueWords says what JSON value encoding/json saw ("string",
// "number 1.5").
func valueWords(v string) string {
	switch v {
	case "array", "object":
		return "an " + v
	case "string", "number":
		return "a " + v
	case "bool":
		return "a boolean"
	}
	return v
}

// jsonFieldNames returns the JSON names of the fields of the struct v
// points to.
func jsonFieldNames(v any) []string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case !f.IsExported() || name == "-":
		case name == "":
			names = append(names, f.Name)
		default:
			names = append(names, name)
		}
	}
	return names
}

// pathID parses path parameter name as an id of kind T.
func pathID[T messages.TurnID | messages.BranchID | messages.SessionID](r *http.Request, name string) (T, error) {
	id, err := messages.ParseID[T](r.PathValue(name))
	if err != nil {
		return id, invalid("%s: %q is not a valid id (26 characters of Crockford base32)", name, r.PathValue(name))
	}
	return id, nil
}
