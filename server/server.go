// Package server is the HTTP side of "tinygpt serve": a JSON API with server-sent events that
// trains, watches, samples, inspects and stores models with the native engine, and serves the
// playground page (package web) that uses only this API.
//
// One training run is active at a time; generation and inspection run alongside it on a
// snapshot of the latest weights. Every run lives in its own folder of the data directory
// (settings and history in run.json, the checkpoint in model.tinygpt, the corpus in corpus.txt),
// so restarting the server or reloading the page loses nothing.
//
// Every API request must carry the access token, in the X-TinyGPT-Token header (or ?token= on a
// GET, for EventSource and download links). Loopback is no boundary between the users of one
// machine, so this holds there too. Requests that change anything must, when a browser sends an
// Origin, come from the server's own origin. The page and its files hold no secret and are
// served to anyone who can reach the server: the page takes the token from its address's
// fragment (#token=, as tinygpt serve prints it), which browsers never send to a server.
package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"tinygpt/backend"
	"tinygpt/gpt"
	"tinygpt/web"
)

// Backend describes a compute backend as the playground shows it.
type Backend struct {
	Name      string `json:"name"`           // "cpu", "webgpu"
	Available bool   `json:"available"`      // it can be chosen
	Detail    string `json:"detail"`         // what it runs on: the CPU, the GPU adapter
	Note      string `json:"note,omitempty"` // why it is not available, or a remark on when it pays
	// OwnMemory says that the backend keeps a run's tensors in memory of its own (a hardware
	// GPU's), so the host needs only a copy of the weights and moments while a checkpoint is
	// written.
	OwnMemory bool `json:"own_memory,omitempty"`
}

// Config configures a Server.
type Config struct {
	// Dir is the data directory; runs are stored in Dir/runs.
	Dir string
	// Token is the access token; when it is empty, New uses the one kept in Dir/token,
	// generating it on the first start.
	Token string
	// Public means the server listens beyond the loopback interface: the Host header is then
	// not restricted to loopback names. (The page and the API need the token either way.)
	Public bool
	// Backends lists the compute backends, in order of preference for "auto".
	Backends func() []Backend
	// Open returns a new instance of the named backend (one per goroutine that uses it) for
	// a model of shape c that runs tokens positions in one pass (the zero Config and 0 where
	// there is no model yet). It refuses a model the backend cannot run, saying why.
	Open func(name string, c gpt.Config, tokens int) (backend.Backend, error)
	// Check, if not nil, says without opening one whether the named backend would refuse
	// such a model, as Open would: plans are made with it.
	Check func(name string, c gpt.Config, tokens int) error
	// MaxCorpusBytes bounds an uploaded or pasted corpus (default DefaultMaxCorpusBytes).
	MaxCorpusBytes int64
	// MaxModelBytes bounds an uploaded model file (default DefaultMaxModelBytes).
	MaxModelBytes int64
	// CalibrationPreset is the preset timed to estimate durations (default "small").
	CalibrationPreset string
	// Logf logs server events (default log.Printf).
	Logf func(format string, args ...any)
}

// Default limits.
const (
	DefaultMaxCorpusBytes = 32 << 20
	DefaultMaxModelBytes  = 1 << 30
)

// Server is the playground's HTTP server state. Create it with New; it is an http.Handler.
type Server struct {
	cfg     Config
	store   *store
	mux     *http.ServeMux
	hub     *hub
	models  *modelCache
	calib   calibration
	closing chan struct{}
	seq     atomic.Uint64 // the last JobState.Seq handed out, over all jobs
	imports chan struct{} // one model upload read and decoded at a time (each up to MaxModelBytes in memory)
	tickets tickets       // download links' stand-ins for the token
	// one checkpoint decoded and converted for a download at a time (each holds the model's
	// whole state in memory with its converted copy)
	conversions chan struct{}

	mu  sync.Mutex
	job *job // the active or most recent training job; nil before the first
}

// New opens (creating if needed) the data directory and returns a server. Runs that were
// training when a previous server stopped without a checkpoint are marked as stopped.
func New(cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("server: no data directory")
	}
	if cfg.Backends == nil || cfg.Open == nil {
		return nil, errors.New("server: Backends and Open are required")
	}
	if cfg.Token == "" {
		tok, err := loadToken(cfg.Dir)
		if err != nil {
			return nil, err
		}
		cfg.Token = tok
	}
	if cfg.MaxCorpusBytes <= 0 {
		cfg.MaxCorpusBytes = DefaultMaxCorpusBytes
	}
	if cfg.MaxModelBytes <= 0 {
		cfg.MaxModelBytes = DefaultMaxModelBytes
	}
	if cfg.CalibrationPreset == "" {
		cfg.CalibrationPreset = "small"
	}
	if cfg.Logf == nil {
		cfg.Logf = log.Printf
	}
	st, err := openStore(cfg.Dir, cfg.Logf)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, store: st, hub: newHub(cfg.Logf), closing: make(chan struct{}),
		imports: make(chan struct{}, 1), conversions: make(chan struct{}, 1)}
	// Job state numbers start from the clock, so that they keep growing across restarts of the
	// server, for a page that stays open.
	s.seq.Store(uint64(time.Now().UnixMilli())) // exact in a JavaScript number
	s.models = newModelCache(s)
	s.routes()
	return s, nil
}

// NewToken returns a random access token.
func NewToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// loadToken returns the token kept in dir/token, creating it (readable by the user only, from
// its creation on) on the first start, so that pages and scripts keep working across restarts
// of the server.
func loadToken(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("data directory: %w", err)
	}
	path := filepath.Join(dir, "token")
	b, err := os.ReadFile(path)
	if err == nil {
		if tok := strings.TrimSpace(string(b)); len(tok) >= 16 {
			return tok, nil
		}
	}
	tok := NewToken()
	if err := writeFileAtomic(path, []byte(tok+"\n")); err != nil {
		return "", err
	}
	return tok, nil
}

// isClosing reports whether Shutdown has begun.
func (s *Server) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// Token returns the access token.
func (s *Server) Token() string { return s.cfg.Token }

// Shutdown stops the training job, if any, saving its checkpoint, and ends the event streams so
// that an http.Server can shut down. It waits for the checkpoint or until ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.isClosing() {
		close(s.closing) // under s.mu: a start either sees it or has set s.job already
	}
	j := s.job
	s.mu.Unlock()
	if j == nil {
		return nil
	}
	j.stop()
	select {
	case <-j.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the training run to save its checkpoint: %w", ctx.Err())
	}
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /api/system", s.handleSystem)
	m.HandleFunc("GET /api/presets", s.handlePresets)
	m.HandleFunc("POST /api/plan", s.handlePlan)
	m.HandleFunc("GET /api/runs", s.handleListRuns)
	m.HandleFunc("POST /api/runs", s.handleStart)
	m.HandleFunc("POST /api/runs/import", s.handleImport)
	m.HandleFunc("GET /api/runs/{id}", s.handleGetRun)
	m.HandleFunc("DELETE /api/runs/{id}", s.handleDeleteRun)
	m.HandleFunc("GET /api/runs/{id}/download", s.handleDownload)
	m.HandleFunc("POST /api/runs/{id}/ticket", s.handleTicket)
	m.HandleFunc("POST /api/runs/{id}/continue", s.handleContinue)
	m.HandleFunc("POST /api/runs/{id}/generate", s.handleGenerate)
	m.HandleFunc("POST /api/runs/{id}/inspect", s.handleInspect)
	m.HandleFunc("GET /api/job", s.handleJob)
	m.HandleFunc("POST /api/job/{action}", s.handleJobAction)
	m.HandleFunc("GET /api/events", s.handleEvents)
	static, _ := fs.Sub(web.Files, "static")
	files := http.FileServerFS(static)
	m.HandleFunc("GET /{$}", s.handleIndex)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/"):
			if allow := s.allowed(r); len(allow) > 0 {
				w.Header().Set("Allow", strings.Join(allow, ", "))
				httpError(w, http.StatusMethodNotAllowed, "method %s not allowed on %s (use %s)", r.Method, r.URL.Path, strings.Join(allow, " or "))
				return
			}
			httpError(w, http.StatusNotFound, "no such API endpoint: %s %s", r.Method, r.URL.Path)
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			httpError(w, http.StatusMethodNotAllowed, "method %s not allowed here", r.Method)
		default:
			files.ServeHTTP(w, r)
		}
	})
	s.mux = m
}

// allowed returns the methods that have a route for r's path other than the catch-all.
func (s *Server) allowed(r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		c := r.Clone(r.Context())
		c.Method = m
		if _, pattern := s.mux.Handler(c); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	return allow
}

// ServeHTTP checks the request's origin and token, then routes it. A panic in a handler
// becomes a 500 with a message instead of a dropped connection.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.cfg.Logf("tinygpt serve: internal error on %s %s: %v", r.Method, r.URL.Path, v)
			httpError(w, http.StatusInternalServerError, "internal error: %v", v)
		}
	}()
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	// On every response, not only the page's: the file server answers odd paths such as
	// /%2f/ with the page too.
	w.Header().Set("Content-Security-Policy", contentPolicy)
	if status, msg := s.check(r); status != 0 {
		httpError(w, status, "%s", msg)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// check returns an HTTP status and message for a request that must be refused, or 0.
func (s *Server) check(r *http.Request) (int, string) {
	if !s.cfg.Public && !loopbackHost(r.Host) {
		return http.StatusForbidden, fmt.Sprintf("host %q is not a loopback name; this server only answers to 127.0.0.1, localhost or [::1] (start it with --addr to listen elsewhere)", r.Host)
	}
	safe := r.Method == http.MethodGet || r.Method == http.MethodHead
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" && strings.HasPrefix(r.URL.Path, "/api/") {
		return http.StatusForbidden, "cross-site request refused"
	}
	if o := r.Header.Get("Origin"); o != "" && !safe {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return http.StatusForbidden, fmt.Sprintf("origin %q may not use this server", o)
		}
	}
	needToken := !safe || strings.HasPrefix(r.URL.Path, "/api/")
	if !needToken {
		return 0, ""
	}
	if safe && s.tickets.valid(r.URL.Query().Get("ticket"), r.URL.Path) {
		return 0, ""
	}
	tok := r.Header.Get("X-TinyGPT-Token")
	if tok == "" && safe {
		tok = r.URL.Query().Get("token") // EventSource and download links cannot set headers
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) != 1 {
		if tok == "" {
			return http.StatusUnauthorized, "missing access token: send it in the X-TinyGPT-Token header, or as ?token= on a GET (tinygpt serve prints it)"
		}
		return http.StatusUnauthorized, "wrong access token"
	}
	return 0, ""
}

func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// handleIndex serves the page. It holds no token: its script takes the token from the
// address's fragment (#token=, as tinygpt serve prints it; see app.js).
func (s *Server) handleIndex(w http.ResponseWriter, r *http.Request) {
	page, err := fs.ReadFile(web.Files, "static/index.html")
	if err != nil {
		httpError(w, http.StatusInternalServerError, "page missing from the binary: %v", err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(page)
}

// contentPolicy is the Content-Security-Policy of every response: the page's scripts, styles
// and images come from this server only (no inline script), no other site may frame it, and
// base-uri, form-action and object-src, which default-src does not cover, allow nothing.
const contentPolicy = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; " +
	"base-uri 'none'; form-action 'none'; object-src 'none'"

// apiError is the body of every error response.
type apiError struct {
	Error string `json:"error"`
}

func httpError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, apiError{Error: fmt.Sprintf(format, args...)})
}

// writeJSON sends v as JSON with the status. It encodes into memory first, so that a value
// JSON cannot hold (a NaN) becomes a 500 with an error message, not a 200 with an empty body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // HTML escaped (<, >, &): answers quote what others wrote
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		enc.Encode(apiError{Error: fmt.Sprintf("internal error: the answer cannot be sent as JSON: %v", err)})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// decodeJSON reads a JSON request body of at most limit bytes into v, refusing unknown fields.
// It writes the error response itself and reports whether decoding succeeded.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			httpError(w, http.StatusRequestEntityTooLarge, "request body is larger than %d bytes", limit)
		case errors.Is(err, io.EOF):
			httpError(w, http.StatusBadRequest, "request body is empty; expected a JSON object")
		default:
			httpError(w, http.StatusBadRequest, "malformed JSON request: %v", err)
		}
		return false
	}
	if dec.More() {
		httpError(w, http.StatusBadRequest, "malformed JSON request: more than one value")
		return false
	}
	return true
}

// sseHeaders prepares a server-sent event stream.
func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// keepAlive is how often an idle event stream sends a comment, so proxies keep it open.
const keepAlive = 15 * time.Second

// sseMessage formats one server-sent event.
func sseMessage(kind string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return []byte("event: " + kind + "\ndata: " + string(b) + "\n\n"), nil
}

// jsonDecoder returns a decoder that refuses unknown fields.
func jsonDecoder(r io.Reader) *json.Decoder {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	return dec
}
