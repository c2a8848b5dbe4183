// Package peer holds what the two interop peers share: their line-oriented
// output, the JSON form of the messages they log, and their TLS set-up.
//
// The peers are test tools for llmgw-wire's Python stream: a test drives
// them as real processes and reads their stdout, one event per line, each
// line a keyword and its arguments, so the output is the protocol between the
// peer and the test.
package peer

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io/ioutil"
	"os"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/stats"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	llmgwv1 "llmgwinterop/gen/llmgwv1"
)

var outMu sync.Mutex

// Line writes one event line on stdout. os.Stdout is unbuffered, so the line
// is on the pipe when Line returns; the mutex keeps lines of concurrent
// streams whole.
func Line(keyword string, args ...string) {
	outMu.Lock()
	defer outMu.Unlock()
	parts := append([]string{keyword}, args...)
	fmt.Fprintln(os.Stdout, strings.Join(parts, " "))
}

// Logf writes a diagnostic on stderr, which tests show only when they fail.
func Logf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// JSON gives a message as one line of protojson with the schema's field
// names. Secrets never appear: a StartShard's api_key is replaced by
// "sha256:<hex>" of its value, which tells a test that the key arrived
// intact without printing it.
func JSON(m proto.Message) string {
	m = redact(m)
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		// Only invalid UTF-8 in a string field can fail here; say so on the
		// line rather than dropping the event.
		return fmt.Sprintf(`{"_unprintable":%q}`, err.Error())
	}
	// protojson may put one space after a colon or comma (deliberately
	// unstable output); it never emits a newline without Multiline, so the
	// result is one line as it is.
	return string(b)
}

// HashKey is how JSON shows an api_key.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func redact(m proto.Message) proto.Message {
	var start *llmgwv1.StartShard
	switch v := m.(type) {
	case *llmgwv1.ControlMessage:
		start = v.GetStartShard()
	case *llmgwv1.StartShard:
		start = v
	}
	if start == nil || start.GetApiKey() == "" {
		return m
	}
	c := proto.Clone(m)
	switch v := c.(type) {
	case *llmgwv1.ControlMessage:
		v.GetStartShard().ApiKey = HashKey(start.GetApiKey())
	case *llmgwv1.StartShard:
		v.ApiKey = HashKey(start.GetApiKey())
	}
	return c
}

// CodeName is a status code as the gRPC spec spells it (FAILED_PRECONDITION),
// the same names grpcio's StatusCode members have.
func CodeName(c codes.Code) string {
	names := map[codes.Code]string{
		codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
		codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
		codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
		codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
		codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
		codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
		codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE",
		codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
	}
	if n, ok := names[c]; ok {
		return n
	}
	return fmt.Sprintf("CODE_%d", uint32(c))
}

// OneLine keeps a status message on its line.
func OneLine(s string) string {
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
}

// TLSFlags are the certificate flags both peers take.
type TLSFlags struct {
	Cert, Key, CA, ServerName string
}

// Enabled says whether any TLS flag was given.
func (f TLSFlags) Enabled() bool {
	return f.Cert != "" || f.Key != "" || f.CA != ""
}

func (f TLSFlags) pool() (*x509.CertPool, error) {
	pem, err := ioutil.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", f.CA)
	}
	return pool, nil
}

func (f TLSFlags) pair() ([]tls.Certificate, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if f.Cert == "" {
		return nil, nil
	}
	c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	return []tls.Certificate{c}, nil
}

// Server is the server's TLS: its certificate, and with a CA, mutual TLS
// (a client certificate signed by that CA is required).
func (f TLSFlags) Server() (credentials.TransportCredentials, error) {
	certs, err := f.pair()
	if err != nil {
		return nil, err
	}
	if certs == nil {
		return nil, errors.New("a TLS server needs --tls-cert and --tls-key")
	}
	cfg := &tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pool, err := f.pool()
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(cfg), nil
}

// Client is the client's TLS: the server verified against the CA (the
// system roots without one), and the client certificate when one is given.
func (f TLSFlags) Client() (credentials.TransportCredentials, error) {
	certs, err := f.pair()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: certs, ServerName: f.ServerName, MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pool, err := f.pool()
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	return credentials.NewTLS(cfg), nil
}

// EncodingLogger is a stats handler that writes one line per call with the
// grpc-encoding header the other side sent (ENCODING gzip, or ENCODING
// identity when it sent none), so a test can see that compression was
// really used on the wire, not merely offered.
type EncodingLogger struct{}

// TagRPC implements stats.Handler.
func (EncodingLogger) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// HandleRPC implements stats.Handler.
func (EncodingLogger) HandleRPC(_ context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok {
		enc := h.Compression
		if enc == "" {
			enc = "identity"
		}
		Line("ENCODING", enc)
	}
}

// TagConn implements stats.Handler.
func (EncodingLogger) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

// HandleConn implements stats.Handler.
func (EncodingLogger) HandleConn(context.Context, stats.ConnStats) {}
